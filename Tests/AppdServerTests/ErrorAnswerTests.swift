import AppdBase
import Foundation
import Testing

@testable import AppdServer

/// An error leaves the daemon as one `AppdError`: its status from the code's one map, its
/// Codable form the body.
@Suite("error answers: one type, one status map, the body its Codable form")
struct ErrorAnswerTests {
    static func answer(_ error: AppdError) throws -> (status: Int, body: AppdError) {
        guard case .json(let status, let data, _) = Reply.failure(error) else {
            throw AppdError(.internal, "an error answer is not JSON")
        }
        // `{"error": {...}}`, read as a client reads it.
        struct Body: Decodable { var error: AppdError }
        return (status, try JSONDecoder().decode(Body.self, from: data).error)
    }

    @Test("each code is answered with its status from the map, invalidConfig with 400, not 500")
    func statuses() throws {
        for code in AppdError.Code.allCases {
            let (status, body) = try Self.answer(AppdError(code, "x"))
            #expect(status == code.httpStatus, "\(code)")
            #expect(body.code == code)
        }
        // What the socket setup throws (HTTPServer): 500 before, by a status spelled there.
        #expect(try Self.answer(AppdError(.invalidConfig, "no socket to listen on")).status == 400)
    }

    @Test("subject, problems and cause reach the client as they were thrown; the daemon's view not")
    func body() throws {
        let thrown = AppdError(
            .invalidBundle, "not a valid app bundle (1 problem)",
            subject: .init(.bundle, view: "/var/lib/appd/incoming/1/Notes.app"),
            problems: [BundleProblem("Info.plist", "CFBundleExecutable 'Notes' does not exist")],
            cause: AppdError(.invalidBundle, "entry 'x' is a hard link", subject: .init(.archive)))
        guard case .json(_, let data, _) = Reply.failure(thrown) else {
            Issue.record("not JSON")
            return
        }
        #expect(!String(decoding: data, as: UTF8.self).contains("incoming"))
        var expected = thrown
        expected.subject = .init(.bundle)
        #expect(try Self.answer(thrown).body == expected)
    }

    @Test("errors no handler foresaw: a bad body is 400, a stopping daemon 503, the rest 500")
    func unforeseen() throws {
        struct Odd: Error {}
        let decoding = DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "x"))
        #expect(AppdError.answering(decoding).code.httpStatus == 400)
        #expect(AppdError.answering(CancellationError()).code.httpStatus == 503)
        #expect(AppdError.answering(Odd()).code.httpStatus == 500)
    }

    @Test("docs/api.md gives every code the status the map gives it")
    func documented() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/api.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        guard let start = text.range(of: "## Errors"), let end = text.range(of: "## Routes")
        else { throw AppdError(.notFound, "docs/api.md has no Errors section") }
        let section = String(text[start.upperBound..<end.lowerBound])
        // `badRequest`/`invalidBundle`/`invalidConfig` 400, `permissionDenied` 403, ...
        let pairs = try Regex(#"((?:`\w+`/?)+) (\d{3})"#)
        var documented: [String: Int] = [:]
        for match in section.matches(of: pairs) {
            let codes = match.output[1].substring ?? ""
            let status = Int(match.output[2].substring ?? "") ?? 0
            for code in codes.split(separator: "/") { documented[code.trimming("`")] = status }
        }
        for code in AppdError.Code.allCases where code.httpStatus != 500 {
            #expect(documented[code.rawValue] == code.httpStatus, "\(code)")
        }
        for (code, status) in documented {
            #expect(AppdError.Code(rawValue: code)?.httpStatus == status, "\(code)")
        }
    }
}

extension Substring {
    fileprivate func trimming(_ character: Character) -> String {
        String(drop { $0 == character }.reversed().drop { $0 == character }.reversed())
    }
}
