import Foundation

/// A reader of the XML property lists bundles carry, in the forms `appd sign`, Xcode and
/// plutil write: a `<plist>` holding a dictionary of dictionaries, arrays, keys, strings,
/// decimal integers, booleans and base64 data, with comments, the five predefined entities and
/// character references. Anything else (reals, dates, CDATA, carriage returns, attributes on a
/// value, an encoding other than UTF-8, a key twice, nesting deeper than `maxDepth`, anything
/// malformed) it leaves to Foundation: `dictionary` returns nil and PropertyListReader reads
/// the file as before, so what is accepted and how it reads never depends on this reader.
///
/// Why: Foundation's reader bridges every value through NSDictionary and NSNumber, and the four
/// plists of a signed bundle took two thirds of appd-oci's verification (perf, bench-oci); this
/// reads them in one pass over the bytes, with no recursion (an app's plist may nest deeply).
enum XMLPropertyList {
    /// Deeper nesting is left to Foundation.
    static let maxDepth = 64

    /// The root dictionary, or nil when the text is not in the forms above.
    static func dictionary(_ xml: [UInt8]) -> [String: PlistValue]? {
        xml.withUnsafeBufferPointer { bytes in
            var reader = Reader(bytes: bytes)
            guard case .dictionary(let root)? = reader.document() else { return nil }
            return root
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        /// A container being read: its items so far, and a dictionary's pending key.
        enum Frame {
            case array([PlistValue])
            case dictionary([String: PlistValue], key: String?)
        }

        /// Prolog, `<plist ...>`, one value, `</plist>`, nothing but white space and comments.
        mutating func document() -> PlistValue? {
            if starts([0xEF, 0xBB, 0xBF]) { at += 3 }
            skipSpaceAndComments()
            if starts("<?xml") {
                guard let end = find("?>") else { return nil }
                let declaration = String(decoding: bytes[at..<end], as: UTF8.self).lowercased()
                if declaration.contains("encoding"),
                    !declaration.contains("\"utf-8\"") && !declaration.contains("'utf-8'")
                {
                    return nil
                }
                at = end + 2
            }
            skipSpaceAndComments()
            if starts("<!DOCTYPE") {
                while at < bytes.count, bytes[at] != UInt8(ascii: ">") {
                    // An internal subset: PlistKeyScanner refuses it, with its reason.
                    if bytes[at] == UInt8(ascii: "[") { return nil }
                    at += 1
                }
                at += 1
            }
            skipSpaceAndComments()
            guard starts("<plist"), at + 6 < bytes.count,
                [UInt8(ascii: ">"), 0x20, 0x09, 0x0A, 0x0D].contains(bytes[at + 6])
            else { return nil }
            // Its attributes (version="1.0"), quoted values skipped whole.
            var quote: UInt8?
            while at < bytes.count {
                let byte = bytes[at]
                at += 1
                if let open = quote {
                    if byte == open { quote = nil }
                } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                    quote = byte
                } else if byte == UInt8(ascii: "/") {
                    return nil
                } else if byte == UInt8(ascii: ">") {
                    break
                }
            }
            guard let value = value() else { return nil }
            skipSpaceAndComments()
            guard closing("plist") else { return nil }
            skipSpaceAndComments()
            return at == bytes.count ? value : nil
        }

        /// One value, containers read with a stack of frames rather than recursion.
        mutating func value() -> PlistValue? {
            var stack: [Frame] = []
            while true {
                skipSpaceAndComments()
                var finished: PlistValue?
                if starts("</") {
                    guard let frame = stack.popLast() else { return nil }
                    switch frame {
                    case .array(let items):
                        guard closing("array") else { return nil }
                        finished = .array(items)
                    case .dictionary(let entries, let key):
                        guard key == nil, closing("dict") else { return nil }
                        finished = .dictionary(entries)
                    }
                } else {
                    guard let (name, empty) = openingTag() else { return nil }
                    if name == "key" {
                        guard case .dictionary(let entries, nil)? = stack.popLast(),
                            let key = empty ? "" : text(until: "key"), entries[key] == nil
                        else { return nil }
                        stack.append(.dictionary(entries, key: key))
                        continue
                    }
                    switch name {
                    case "dict" where empty: finished = .dictionary([:])
                    case "array" where empty: finished = .array([])
                    case "dict", "array":
                        guard stack.count < XMLPropertyList.maxDepth else { return nil }
                        stack.append(name == "dict" ? .dictionary([:], key: nil) : .array([]))
                        continue
                    case "string":
                        guard let text = empty ? "" : text(until: "string") else { return nil }
                        finished = .string(text)
                    case "integer":
                        guard !empty, let text = text(until: "integer"), let number = integer(text)
                        else { return nil }
                        finished = .integer(number)
                    case "true", "false":
                        guard empty || closing(name) else { return nil }
                        finished = .bool(name == "true")
                    case "data":
                        guard let text = empty ? "" : text(until: "data"), let data = base64(text)
                        else { return nil }
                        finished = .data(data)
                    default: return nil
                    }
                }
                guard let value = finished else { return nil }
                // The frame is taken off the stack and emptied before its items grow, so they
                // are never copied (a plist may hold many).
                guard var frame = stack.popLast() else { return value }
                switch frame {
                case .array(var items):
                    frame = .array([])
                    items.append(value)
                    frame = .array(items)
                case .dictionary(var entries, let key):
                    guard let key else { return nil }
                    frame = .array([])
                    entries[key] = value
                    frame = .dictionary(entries, key: nil)
                }
                stack.append(frame)
            }
        }

        /// `<name>` or `<name/>` without attributes: the name, and whether it was self-closed.
        mutating func openingTag() -> (String, Bool)? {
            guard at < bytes.count, bytes[at] == UInt8(ascii: "<") else { return nil }
            var end = at + 1
            while end < bytes.count, Self.isNameByte(bytes[end]) { end += 1 }
            guard end > at + 1, end < bytes.count else { return nil }
            let name = String(decoding: bytes[(at + 1)..<end], as: UTF8.self)
            if bytes[end] == UInt8(ascii: ">") {
                at = end + 1
                return (name, false)
            }
            guard end + 1 < bytes.count, bytes[end] == UInt8(ascii: "/"),
                bytes[end + 1] == UInt8(ascii: ">")
            else { return nil }
            at = end + 2
            return (name, true)
        }

        /// `</name>` here: consumed, true.
        mutating func closing(_ name: String) -> Bool {
            let tag = Array("</\(name)>".utf8)
            guard starts(tag) else { return false }
            at += tag.count
            return true
        }

        /// Character data up to `</name>`, entities and character references decoded; nil for
        /// markup inside it, a carriage return (XML would normalize it), another control
        /// character, or bytes that are not UTF-8.
        mutating func text(until name: String) -> String? {
            var decoded: [UInt8] = []
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: "<") {
                    guard closing(name) else { return nil }
                    return String(validating: decoded, as: UTF8.self)
                } else if byte == UInt8(ascii: "&") {
                    var end = at + 1
                    while end < bytes.count, end - at <= 12, bytes[end] != UInt8(ascii: ";") {
                        end += 1
                    }
                    guard end < bytes.count, bytes[end] == UInt8(ascii: ";"),
                        let character = Self.entity(bytes[(at + 1)..<end])
                    else { return nil }
                    decoded += character
                    at = end + 1
                } else if byte < 0x20 && byte != 0x09 && byte != 0x0A {
                    return nil
                } else {
                    decoded.append(byte)
                    at += 1
                }
            }
            return nil
        }

        /// A decimal integer as Int64: `-`? digits. Other forms (a `+`, hex, white space,
        /// out of range) are Foundation's.
        func integer(_ text: String) -> Int64? {
            let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
            guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return nil
            }
            return Int64(text)
        }

        /// Base64 with white space between; anything else is Foundation's.
        func base64(_ text: String) -> Data? {
            let kept = text.utf8.filter { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A }
            guard !kept.isEmpty else { return Data() }
            return Data(base64Encoded: Data(kept))
        }

        mutating func skipSpaceAndComments() {
            while at < bytes.count {
                let byte = bytes[at]
                if byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
                    at += 1
                } else if starts("<!--"), let end = find("-->", from: at + 4) {
                    at = end + 3
                } else {
                    return
                }
            }
        }

        func starts(_ text: String) -> Bool { starts(Array(text.utf8)) }

        func starts(_ prefix: [UInt8]) -> Bool {
            guard at + prefix.count <= bytes.count else { return false }
            for (offset, byte) in prefix.enumerated() where bytes[at + offset] != byte {
                return false
            }
            return true
        }

        func find(_ text: String, from start: Int? = nil) -> Int? {
            let needle = Array(text.utf8)
            var index = start ?? at
            while index + needle.count <= bytes.count {
                if bytes[index] == needle[0],
                    needle.indices.allSatisfy({ bytes[index + $0] == needle[$0] })
                {
                    return index
                }
                index += 1
            }
            return nil
        }

        static func isNameByte(_ byte: UInt8) -> Bool {
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
        }

        /// The UTF-8 of a predefined entity or a character reference (`name` without & and ;).
        static func entity(_ name: Slice<UnsafeBufferPointer<UInt8>>) -> [UInt8]? {
            let text = String(decoding: name, as: UTF8.self)
            let scalar: UInt32?
            switch text {
            case "lt": return [UInt8(ascii: "<")]
            case "gt": return [UInt8(ascii: ">")]
            case "amp": return [UInt8(ascii: "&")]
            case "apos": return [UInt8(ascii: "'")]
            case "quot": return [UInt8(ascii: "\"")]
            case _ where text.hasPrefix("#x"): scalar = UInt32(text.dropFirst(2), radix: 16)
            case _ where text.hasPrefix("#"): scalar = UInt32(text.dropFirst(1), radix: 10)
            default: return nil
            }
            // A NUL or another control character is Foundation's to judge.
            guard let scalar, scalar >= 0x20 || scalar == 0x09 || scalar == 0x0A,
                let character = Unicode.Scalar(scalar)
            else { return nil }
            return Array(String(character).utf8)
        }
    }
}
