/// Why an answer could not be read, before it is put in words for a request.
enum ResponseFailure: Error {
    case transport(TransportError)
    /// The daemon closed the connection before the first byte of an answer.
    case noAnswer
    /// The connection ended in the middle of the answer.
    case truncated(String)
    /// Not HTTP/1.x as RFC 9112 writes it.
    case malformed(String)
    case tooLarge(String)
}

/// The status line and headers of an answer.
public struct HTTPResponseHead: Sendable {
    public var status: Int
    public var reason: String
    /// In the order received; names as sent.
    public var headers: [(name: String, value: String)]

    /// Every value of a header (names compared without case), comma lists split.
    public func values(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }
            .flatMap { $0.value.split(separator: ",") }
            .map { $0.trimmingBlanks() }
    }

    public func value(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

extension HTTPResponseReader {
    enum Framing: Equatable {
        case none
        case length(Int)
        case chunked
        case untilClose
    }

    /// How the body ends (RFC 9112 section 6.3), for an answer to `method`.
    static func framing(of head: HTTPResponseHead, method: String) throws -> Framing {
        if method == "HEAD" || head.status == 204 || head.status == 304 || head.status < 200 {
            return .none
        }
        let codings = head.values("Transfer-Encoding").map { $0.lowercased() }.filter {
            !$0.isEmpty
        }
        if let last = codings.last {
            guard last == "chunked" else { return .untilClose }
            guard codings.dropLast().allSatisfy({ $0 == "identity" }) else {
                throw ResponseFailure.malformed(
                    "unsupported transfer coding '\(codings.joined(separator: ", "))'")
            }
            return .chunked
        }
        let lengths = Set(head.values("Content-Length"))
        guard let text = lengths.first else { return .untilClose }
        guard lengths.count == 1, !text.isEmpty, text.count <= 18,
            text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            let length = Int(text)
        else {
            throw ResponseFailure.malformed(
                "bad Content-Length '\(Self.printable(lengths.sorted().joined(separator: ", ")))'")
        }
        return .length(length)
    }

    /// Text from the wire fit for an error message: control characters shown as `?`, cut short.
    static func printable(_ text: String, limit: Int = 120) -> String {
        let cleaned = String(
            text.unicodeScalars.prefix(limit).map {
                $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0)
            })
        return text.unicodeScalars.count > limit ? cleaned + "..." : cleaned
    }
}

extension StringProtocol {
    /// Without the spaces and tabs HTTP allows around a field value.
    func trimmingBlanks() -> String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isBlank($0) }),
            let last = lastIndex(where: { !isBlank($0) })
        else {
            return ""
        }
        return String(self[first...last])
    }
}
