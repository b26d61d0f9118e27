/// A strict JSON reader for lifecycle datagrams, which come from apps and are hostile input.
///
/// Why not `JSONSerialization`: it hands back `Any`, and what the daemon did with it decided
/// whether it trapped (`Int(1e19)`); it keeps the last of duplicate keys, accepts a nesting
/// depth of its own choosing, and gives no way to bound a number before it becomes a Double.
/// This reader is total over any bytes: it returns the top-level object's scalar fields or
/// names the first thing wrong. It is iterative (no recursion over app-controlled nesting) and
/// stops at the first fault. Its cost is that of `JSONSerialization` in a release build (3.3
/// against 3.5 µs a message, 1,000,000 of the messages apps send), 5x it in a debug build
/// (19 µs; Foundation comes prebuilt optimized), and it runs only for the messages the rate
/// limit lets through (LifecycleChannel), so at most 100 a second per app.
///
/// The rules, beyond RFC 8259: the top level is an object; its keys are unique; values nested
/// in it are skipped (unknown fields are ignored) but may nest at most `maxDepth` deep; a
/// number literal is at most `maxNumberLength` characters and must be finite as a Double;
/// strings are valid UTF-8 without control characters, and escapes name whole code points
/// (a lone surrogate is an error); at most `maxFields` fields.
struct LifecycleJSON {
    enum Value: Equatable {
        case string(String)
        /// The literal as written, and its value as a Double (finite).
        case number(literal: String, value: Double)
        case bool(Bool)
        case null
        /// An object or array: skipped, only its presence is known.
        case nested
    }

    static let maxDepth = 8
    static let maxNumberLength = 40
    static let maxFields = 64

    struct Failure: Error, Equatable {
        var message: String
        init(_ message: String) { self.message = message }
    }

    private let bytes: [UInt8]
    private var index = 0

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The top-level object's fields, or why `bytes` is not a message.
    static func object(_ bytes: [UInt8]) -> Result<[String: Value], Failure> {
        var reader = LifecycleJSON(bytes)
        do {
            return .success(try reader.readTopObject())
        } catch let failure as Failure {
            return .failure(failure)
        } catch {
            return .failure(Failure("\(error)"))
        }
    }

    private mutating func readTopObject() throws -> [String: Value] {
        // Whole message valid UTF-8 first: strings are then decoded without repair, and no
        // invalid byte hides in a skipped part either.
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw Failure("not valid UTF-8")
        }
        skipSpace()
        guard peek() == UInt8(ascii: "{") else { throw Failure("not a JSON object") }
        index += 1
        var fields: [String: Value] = [:]
        skipSpace()
        if peek() == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipSpace()
                guard peek() == UInt8(ascii: "\"") else {
                    throw Failure("expected a field name at byte \(index)")
                }
                let key = try readString()
                skipSpace()
                guard peek() == UInt8(ascii: ":") else {
                    throw Failure("expected ':' after \"\(key.prefix(40))\"")
                }
                index += 1
                skipSpace()
                let value = try readValue()
                guard fields.updateValue(value, forKey: key) == nil else {
                    throw Failure("the field \"\(key.prefix(40))\" appears twice")
                }
                guard fields.count <= Self.maxFields else {
                    throw Failure("more than \(Self.maxFields) fields")
                }
                skipSpace()
                if peek() == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard peek() == UInt8(ascii: "}") else {
                    throw Failure("expected ',' or '}' at byte \(index)")
                }
                index += 1
                break
            }
        }
        skipSpace()
        guard index == bytes.count else { throw Failure("bytes after the object at byte \(index)") }
        return fields
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
            index += 1
        }
    }

    private mutating func readValue() throws -> Value {
        guard let byte = peek() else { throw Failure("the message ends where a value should be") }
        switch byte {
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            try skipNested()
            return .nested
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try readNumber()
        default: throw Failure("unexpected byte 0x\(String(byte, radix: 16)) at byte \(index)")
        }
    }

    private mutating func literal(_ word: String) throws {
        let expected = Array(word.utf8)
        guard index + expected.count <= bytes.count,
            bytes[index..<index + expected.count].elementsEqual(expected)
        else {
            throw Failure("unexpected text at byte \(index)")
        }
        index += expected.count
    }

    /// RFC 8259's number grammar, bounded in length; the value must be a finite Double.
    private mutating func readNumber() throws -> Value {
        let start = index
        func digits() -> Int {
            let from = index
            while let byte = peek(), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                index += 1
            }
            return index - from
        }
        if peek() == UInt8(ascii: "-") { index += 1 }
        if peek() == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits() > 0 else { throw Failure("a malformed number at byte \(start)") }
        }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw Failure("a malformed number at byte \(start)") }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw Failure("a malformed number at byte \(start)") }
        }
        guard index - start <= Self.maxNumberLength else {
            throw Failure(
                "a number of \(index - start) characters (at most \(Self.maxNumberLength))")
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw Failure("the number \(text) is out of range")
        }
        return .number(literal: text, value: value)
    }

    private mutating func readString() throws -> String {
        index += 1  // the opening quote
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flushRun(_ end: Int) {
            // Already validated as UTF-8 as a whole, and a run never splits a sequence (it ends
            // at an ASCII quote or backslash).
            scalars.append(
                contentsOf: String(decoding: bytes[runStart..<end], as: UTF8.self).unicodeScalars)
        }
        while true {
            guard let byte = peek() else { throw Failure("a string that does not end") }
            if byte == UInt8(ascii: "\"") {
                flushRun(index)
                index += 1
                return String(scalars)
            }
            if byte < 0x20 { throw Failure("a control character in a string at byte \(index)") }
            guard byte == UInt8(ascii: "\\") else {
                index += 1
                continue
            }
            flushRun(index)
            index += 1
            guard let escape = peek() else { throw Failure("a string that does not end") }
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                let unit = try hex4()
                var code = UInt32(unit)
                if (0xD800..<0xDC00).contains(unit) {
                    guard peek() == UInt8(ascii: "\\"), index + 1 < bytes.count,
                        bytes[index + 1] == UInt8(ascii: "u")
                    else {
                        throw Failure("a lone surrogate \\u\(String(unit, radix: 16)) in a string")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else {
                        throw Failure("a lone surrogate \\u\(String(unit, radix: 16)) in a string")
                    }
                    code = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                } else if (0xDC00..<0xE000).contains(unit) {
                    throw Failure("a lone surrogate \\u\(String(unit, radix: 16)) in a string")
                }
                guard let scalar = Unicode.Scalar(code) else {
                    throw Failure("an invalid escape \\u\(String(unit, radix: 16))")
                }
                scalars.append(scalar)
            default:
                throw Failure("an invalid escape at byte \(index - 2)")
            }
            runStart = index
        }
    }

    private mutating func hex4() throws -> UInt16 {
        guard index + 4 <= bytes.count else { throw Failure("a \\u escape cut short") }
        var value: UInt16 = 0
        for byte in bytes[index..<index + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw Failure("a \\u escape with a non-hex digit at byte \(index)")
            }
            value = value << 4 | UInt16(digit)
        }
        index += 4
        return value
    }

    /// Skips one object or array (validating it) with an explicit stack, never recursion.
    private mutating func skipNested() throws {
        // What each open container expects next.
        enum Expect { case firstKeyOrEnd, key, colon, value, firstValueOrEnd, commaOrEnd }
        var stack: [(isObject: Bool, expect: Expect)] = []
        func open(_ byte: UInt8) throws {
            guard stack.count < Self.maxDepth else {
                throw Failure("values nested more than \(Self.maxDepth) deep")
            }
            index += 1
            stack.append(
                byte == UInt8(ascii: "{") ? (true, .firstKeyOrEnd) : (false, .firstValueOrEnd))
        }
        try open(bytes[index])
        while let top = stack.last {
            skipSpace()
            guard let byte = peek() else { throw Failure("the message ends inside a nested value") }
            let last = stack.count - 1
            switch top.expect {
            case .firstKeyOrEnd, .key:
                if top.expect == .firstKeyOrEnd && byte == UInt8(ascii: "}") {
                    index += 1
                    stack.removeLast()
                    continue
                }
                guard byte == UInt8(ascii: "\"") else {
                    throw Failure("expected a field name at byte \(index)")
                }
                _ = try readString()
                stack[last].expect = .colon
            case .colon:
                guard byte == UInt8(ascii: ":") else {
                    throw Failure("expected ':' at byte \(index)")
                }
                index += 1
                stack[last].expect = .value
            case .firstValueOrEnd, .value:
                if top.expect == .firstValueOrEnd && byte == UInt8(ascii: "]") {
                    index += 1
                    stack.removeLast()
                    continue
                }
                stack[last].expect = .commaOrEnd
                if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") {
                    try open(byte)
                } else {
                    _ = try readValue()
                }
            case .commaOrEnd:
                if byte == UInt8(ascii: ",") {
                    index += 1
                    stack[last].expect = top.isObject ? .key : .value
                } else if byte == UInt8(ascii: top.isObject ? "}" : "]") {
                    index += 1
                    stack.removeLast()
                } else {
                    throw Failure("expected ',' or a closing bracket at byte \(index)")
                }
            }
        }
    }
}
