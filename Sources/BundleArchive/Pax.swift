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
