import AppBundle
import AppdBase
import Glibc
import PrintableText

/// The parts of POSIX tar (ustar plus pax extended headers) and GNU tar's defaults that a
/// bundle needs. Both sides share this so the writer emits exactly what the extractor accepts.
enum Tar {
    static let blockSize = 512
    /// The largest pax or GNU long-name record held in memory. Real ones are a few hundred
    /// bytes; a bigger one is an attempt to make the daemon buffer without bound.
    static let maxMetadataBytes = 64 << 10
    /// What an 11-digit octal size field holds (8 GiB - 1); larger sizes go in a pax record.
    static let maxOctalSize: Int64 = (1 << 33) - 1
    /// What fits in the `name` and `linkname` fields; longer ones go in a pax record.
    static let nameFieldBytes = 100

    enum EntryType {
        static let regular = UInt8(ascii: "0")
        static let regularOld: UInt8 = 0
        static let hardLink = UInt8(ascii: "1")
        static let symlink = UInt8(ascii: "2")
        static let directory = UInt8(ascii: "5")
        static let paxEntry = UInt8(ascii: "x")
        static let paxGlobal = UInt8(ascii: "g")
        static let gnuLongName = UInt8(ascii: "L")
        static let gnuLongLink = UInt8(ascii: "K")
    }

    /// Zero bytes that bring `size` up to a whole number of blocks.
    static func padding(for size: Int64) -> Int { Int((512 - size % 512) % 512) }

    /// Why a type is refused, in words a person knows.
    static func describe(type: UInt8) -> String {
        switch type {
        case UInt8(ascii: "1"): "a hard link"
        case UInt8(ascii: "3"): "a character device"
        case UInt8(ascii: "4"): "a block device"
        case UInt8(ascii: "6"): "a FIFO"
        case UInt8(ascii: "7"): "a contiguous file"
        case UInt8(ascii: "S"): "a GNU sparse file"
        case UInt8(ascii: "D"): "a GNU dump directory"
        case UInt8(ascii: "M"): "a GNU multi-volume continuation"
        case UInt8(ascii: "V"): "a GNU volume label"
        case UInt8(ascii: "N"): "an old GNU long-name entry"
        case 0x21...0x7E: "of unknown type '\(Character(Unicode.Scalar(type)))'"
        default: "of unknown type 0x\(String(type, radix: 16))"
        }
    }

    /// A name or target from the archive in a message: the one rule (`Printable`), cut at 300
    /// scalars.
    static func shown(_ bytes: some Collection<UInt8>) -> String {
        Printable(bytes: bytes, limit: 300).description
    }
}

extension AppdError {
    /// A refused archive, naming the entry: the one error every archive problem becomes. Its
    /// subject is the archive, which each reader names its own way (the file it sent, "the
    /// backup archive").
    static func archive(_ entry: String, _ problem: String) -> AppdError {
        AppdError(.invalidBundle, "entry '\(entry)' \(problem)", subject: .init(.archive))
    }

    /// A refused archive where no entry is to blame (truncation between entries, trailing data).
    static func archive(_ problem: String) -> AppdError {
        AppdError(.invalidBundle, problem, subject: .init(.archive))
    }
}

/// The fields of one header block that the extractor uses, each already validated.
struct TarHeader {
    /// `prefix/name` for ustar headers (GNU headers keep other data in the prefix area).
    var name: [UInt8]
    var mode: Int64
    var size: Int64
    var type: UInt8
    var linkName: [UInt8]

    /// Parses a 512-byte header block. `position` says where it started, for messages.
    static func decode(_ block: UnsafeRawBufferPointer, position: Int64) throws -> TarHeader {
        let rawName = Array(string(block[0..<100]))
        let shown = rawName.isEmpty ? "(header at byte \(position))" : Tar.shown(rawName)
        func bad(_ problem: String) -> AppdError { .archive(shown, problem) }

        guard let stored = number(block[148..<156], allowEmpty: false) else {
            throw bad("has a checksum field that is not an octal number")
        }
        var unsigned: Int64 = 0
        var signed: Int64 = 0
        for (index, byte) in block.enumerated() {
            let counted = (148..<156).contains(index) ? UInt8(ascii: " ") : byte
            unsigned += Int64(counted)
            signed += Int64(Int8(bitPattern: counted))
        }
        // Some old tars summed signed chars; GNU tar accepts either, and so do we.
        guard stored == unsigned || stored == signed else {
            throw bad("has a bad header checksum (stored \(stored), computed \(unsigned))")
        }

        let magic = Array(block[257..<263])
        let isUstar = magic == Array("ustar\0".utf8)
        let isGNU = Array(block[257..<265]) == Array("ustar  \0".utf8)
        guard isUstar || isGNU else {
            throw bad("is not a ustar or GNU tar header (magic \(Tar.shown(magic)))")
        }
        guard let mode = number(block[100..<108], allowEmpty: false), (0...0o7777777).contains(mode)
        else { throw bad("has a bad mode field") }
        guard let size = number(block[124..<136], allowEmpty: false), size >= 0 else {
            throw bad("has a bad size field")
        }
        // Unused, but a malformed one means the header is not what it claims to be.
        for (range, field) in [(108..<116, "uid"), (116..<124, "gid"), (136..<148, "mtime")] {
            guard number(block[range], allowEmpty: true) != nil else {
                throw bad("has a bad \(field) field")
            }
        }

        var name = rawName
        let prefix = string(block[345..<500])
        if isUstar && !prefix.isEmpty { name = Array(prefix) + [UInt8(ascii: "/")] + name }
        return TarHeader(
            name: name, mode: mode, size: size, type: block[156],
            linkName: Array(string(block[157..<257])))
    }

    /// A NUL-terminated field; a field that fills its space has no terminator.
    private static func string(_ field: Slice<UnsafeRawBufferPointer>) -> Slice<
        UnsafeRawBufferPointer
    > {
        field.prefix(while: { $0 != 0 })
    }

    /// An octal field (optional leading spaces, digits, then only NULs or spaces) or a GNU
    /// base-256 field (high bit of the first byte set). Nil for anything else or on overflow.
    static func number(_ field: Slice<UnsafeRawBufferPointer>, allowEmpty: Bool) -> Int64? {
        guard let first = field.first else { return nil }
        if first & 0x80 != 0 {
            let negative = first & 0x40 != 0
            var value: Int64 = 0
            for (index, raw) in field.enumerated() {
                var byte = negative ? ~raw : raw
                if index == 0 { byte &= 0x3F }
                guard value <= Int64.max >> 8 else { return nil }
                value = value << 8 | Int64(byte)
            }
            return negative ? -value - 1 : value
        }
        var rest = field.drop(while: { $0 == UInt8(ascii: " ") })
        var value: Int64 = 0
        var digits = 0
        while let byte = rest.first, (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(byte) {
            guard value <= Int64.max >> 3 else { return nil }
            value = value << 3 | Int64(byte - UInt8(ascii: "0"))
            digits += 1
            rest = rest.dropFirst()
        }
        guard rest.allSatisfy({ $0 == 0 || $0 == UInt8(ascii: " ") }) else { return nil }
        return digits > 0 || allowEmpty ? value : nil
    }

    /// One header block: ustar, uid/gid 0, mtime 0, no user or group names. The caller has
    /// made sure `name` and `linkName` fit (longer ones travel in a pax record).
    static func encode(
        name: some Collection<UInt8>, mode: Int64, size: Int64, type: UInt8,
        linkName: some Collection<UInt8> = [UInt8]()
    ) -> [UInt8] {
        var block = [UInt8](repeating: 0, count: Tar.blockSize)
        func put(_ bytes: some Collection<UInt8>, at offset: Int, width: Int) {
            for (index, byte) in bytes.prefix(width).enumerated() { block[offset + index] = byte }
        }
        func octal(_ value: Int64, at offset: Int, width: Int) {
            let digits = String(value, radix: 8)
            put(
                (String(repeating: "0", count: max(0, width - 1 - digits.count)) + digits).utf8,
                at: offset, width: width - 1)
        }
        put(name, at: 0, width: 100)
        octal(mode, at: 100, width: 8)
        octal(0, at: 108, width: 8)
        octal(0, at: 116, width: 8)
        octal(size <= Tar.maxOctalSize ? size : 0, at: 124, width: 12)
        octal(0, at: 136, width: 12)
        block[156] = type
        put(linkName, at: 157, width: 100)
        put("ustar\u{0}00".utf8, at: 257, width: 8)
        octal(0, at: 329, width: 8)
        octal(0, at: 337, width: 8)
        put("        ".utf8, at: 148, width: 8)
        let sum = block.reduce(0) { $0 + Int64($1) }
        octal(sum, at: 148, width: 7)
        block[154] = 0
        block[155] = UInt8(ascii: " ")
        return block
    }
}

/// pax extended header records (POSIX.1-2001): `"<length> <key>=<value>\n"`, where the decimal
/// length counts the whole record, itself included.
enum Pax {
    static func record(_ key: String, _ value: some Collection<UInt8>) -> [UInt8] {
        let body = 1 + key.utf8.count + 1 + value.count + 1
        // Adding the length's own digits can add a digit to the length.
        var length = body + String(body).count
        while body + String(length).count != length { length = body + String(length).count }
        return Array("\(length) \(key)=".utf8) + value + [UInt8(ascii: "\n")]
    }

    /// The records of one extended header, in order; nil if any is malformed.
    static func records(_ data: [UInt8]) -> [(key: String, value: [UInt8])]? {
        var records: [(key: String, value: [UInt8])] = []
        var start = 0
        while start < data.count {
            var index = start
            var length = 0
            while index < data.count, let digit = decimalDigit(data[index]) {
                guard length <= data.count else { return nil }
                length = length * 10 + digit
                index += 1
            }
            let digits = index - start
            // The shortest record is "<n> k=\n".
            guard digits > 0, index < data.count, data[index] == UInt8(ascii: " "),
                length >= digits + 4, start + length <= data.count,
                data[start + length - 1] == UInt8(ascii: "\n")
            else { return nil }
            let body = data[(index + 1)..<(start + length - 1)]
            guard let equals = body.firstIndex(of: UInt8(ascii: "=")), equals > body.startIndex,
                let key = String(validating: body[..<equals], as: UTF8.self)
            else { return nil }
            records.append((key, Array(body[(equals + 1)...])))
            start += length
        }
        return records
    }

    /// A pax decimal value (`size`): digits only, no sign, no overflow.
    static func decimal(_ value: [UInt8]) -> Int64? {
        guard !value.isEmpty else { return nil }
        var result: Int64 = 0
        for byte in value {
            guard let digit = decimalDigit(byte) else { return nil }
            let (times, overflow1) = result.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(Int64(digit))
            guard !overflow1 && !overflow2 else { return nil }
            result = sum
        }
        return result
    }

    private static func decimalDigit(_ byte: UInt8) -> Int? {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) ? Int(byte - UInt8(ascii: "0")) : nil
    }
}
