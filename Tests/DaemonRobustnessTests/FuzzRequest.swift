import Foundation

/// One generated request: a route of the API bent in a few random ways, then possibly
/// mangled at the byte level. Streams (`/v1/events`, followed logs, `wait`) are left out:
/// they rightly stay open.
struct FuzzRequest: CustomStringConvertible {
    var bytes: [UInt8]

    var isHead: Bool { bytes.starts(with: Array("HEAD ".utf8)) }

    var description: String { String(decoding: bytes.prefix(300), as: UTF8.self).debugDescription }

    static let routes: [(method: String, path: String, body: String?)] = [
        ("GET", "/v1/version", nil),
        ("GET", "/v1/apps", nil),
        ("GET", "/v1/apps/com.example.x", nil),
        ("DELETE", "/v1/apps/com.example.x?keepData=1", nil),
        ("GET", "/v1/apps/com.example.x/containers/data", nil),
        ("GET", "/v1/apps/com.example.x/containers/group/group.x", nil),
        ("POST", "/v1/apps/com.example.x/launch", #"{"arguments": ["a", "b"]}"#),
        ("POST", "/v1/apps?name=X.app", "not a tar archive"),
        ("GET", "/v1/instances?app=com.example.x&all=1", nil),
        ("GET", "/v1/instances/0123456789ab", nil),
        ("POST", "/v1/instances/0123456789ab/terminate", #"{"grace": 1.5}"#),
        ("POST", "/v1/instances/0123456789ab/kill", nil),
        ("POST", "/v1/instances/0123456789ab/suspend", nil),
    ]
    static let methods = [
        "GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS", "PATCH", "get", "G\u{0}T", "X-Custom",
        "",
    ]
    static let versions = [
        "HTTP/1.1", "HTTP/1.0", "HTTP/1.2", "HTTP/2.0", "HTTP/9.9", "", "http/1.1", "HTTP/1.1 junk",
    ]
    static let oddPieces = [
        "%00", "%2F", "%2e%2e", "%FF", "%C3%A9", "%", "%zz", "..", "//", "é", "\u{1F600}", "?", "#",
        ";", "&=&",
        "?name=../../x.app", "?app=", String(repeating: "a", count: 300), "\\", "~", "%25", "\t",
    ]
    static let headerNames = [
        "X-A", "Content-Type", "Accept", "Connection", "Expect", "Host", "Transfer-Encoding",
        "X\u{0}Y", "", " Lead", "Trail ",
    ]
    static let headerValues = [
        "application/json", "application/x-tar", "close", "keep-alive", "100-continue", "chunked",
        "", "é",
        "\u{7F}", String(repeating: "v", count: 2000), "a\rb", "gzip, chunked",
    ]

    static func make(using random: inout SeededGenerator) -> FuzzRequest {
        let route = routes.randomElement(using: &random)!
        var method = route.method
        if Int.random(in: 0..<5, using: &random) == 0 {
            method = methods.randomElement(using: &random)!
        }
        var path = route.path
        for _ in 0..<Int.random(in: 0...2, using: &random) {
            let at = path.index(
                path.startIndex, offsetBy: Int.random(in: 0...path.count, using: &random))
            path.insert(contentsOf: oddPieces.randomElement(using: &random)!, at: at)
        }
        var version = "HTTP/1.1"
        if Int.random(in: 0..<8, using: &random) == 0 {
            version = versions.randomElement(using: &random)!
        }
        var headers = [("Host", "localhost")]
        for _ in 0..<Int.random(in: 0...2, using: &random) {
            headers.append(
                (
                    headerNames.randomElement(using: &random)!,
                    headerValues.randomElement(using: &random)!
                ))
        }
        if Bool.random(using: &random) { headers.append(("Connection", "close")) }
        var body = Array((route.body ?? "").utf8)
        if !body.isEmpty && Int.random(in: 0..<4, using: &random) == 0 {
            body = (0..<Int.random(in: 0...600, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
        }
        var bodyBytes = body
        switch Int.random(in: 0..<6, using: &random) {
        case 0:
            headers.append(("Transfer-Encoding", "chunked"))
            bodyBytes = chunked(body, using: &random)
        case 1:
            // A length that lies, in either direction, or is no length at all.
            let lies = [
                "\(body.count + Int.random(in: 1...50, using: &random))",
                "\(max(0, body.count - 3))",
                "-1", "0x10", "99999999999999999999", " \(body.count)",
                "\(body.count), \(body.count)",
            ]
            headers.append(("Content-Length", lies.randomElement(using: &random)!))
        default:
            if !body.isEmpty || method == "POST" {
                headers.append(("Content-Length", "\(body.count)"))
            }
        }
        var bytes = Array("\(method) \(path) \(version)\r\n".utf8)
        for (name, value) in headers { bytes += Array("\(name): \(value)\r\n".utf8) }
        bytes += Array("\r\n".utf8) + bodyBytes
        mangle(&bytes, using: &random)
        return FuzzRequest(bytes: bytes)
    }

    /// Chunks of random sizes, some of them declared wrong or in bad hex.
    static func chunked(_ body: [UInt8], using random: inout SeededGenerator) -> [UInt8] {
        var out: [UInt8] = []
        var rest = body[...]
        while !rest.isEmpty {
            let size = Int.random(in: 1...max(1, rest.count), using: &random)
            var sizeText = String(size, radix: 16)
            switch Int.random(in: 0..<10, using: &random) {
            case 0: sizeText = String(size + 7, radix: 16)
            case 1:
                sizeText = ["zz", "-1", "ffffffffffffffffff", "", "1;ext=\"x\""].randomElement(
                    using: &random)!
            default: break
            }
            out += Array("\(sizeText)\r\n".utf8) + rest.prefix(size) + Array("\r\n".utf8)
            rest = rest.dropFirst(size)
        }
        return out + Array("0\r\n\r\n".utf8)
    }

    /// Sometimes: cut short, bytes flipped or inserted, a stretch repeated (a second request).
    static func mangle(_ bytes: inout [UInt8], using random: inout SeededGenerator) {
        switch Int.random(in: 0..<8, using: &random) {
        case 0:
            bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &random)))
        case 1:
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(
                    in: 0...255, using: &random)
            }
        case 2:
            let controls: [UInt8] = [0, 9, 10, 13, 32, 0x7F, 0xFF]
            bytes.insert(
                controls.randomElement(using: &random)!,
                at: Int.random(in: 0...bytes.count, using: &random))
        case 3:
            bytes += bytes
        default:
            break
        }
    }
}
