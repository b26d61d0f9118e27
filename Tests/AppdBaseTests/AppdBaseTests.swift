import AppdBase
import Foundation
import Glibc
import Testing

@Suite("the base module: errors, errno, EINTR, the UTC calendar")
struct AppdBaseTests {
    @Test("every error code has its HTTP status, and the protocol's own codes their usual one")
    func httpStatuses() {
        let expected: [AppdError.Code: Int] = [
            .notFound: 404, .exists: 409, .conflict: 409, .permissionDenied: 403,
            .invalidBundle: 400, .badRequest: 400, .invalidConfig: 400, .tooLarge: 413,
            .tooManyRequests: 429, .unsupportedMediaType: 415, .methodNotAllowed: 405,
            .unsupported: 501, .unavailable: 503, .corruptState: 500, .io: 500, .internal: 500,
            .badResponse: 500,
        ]
        #expect(Set(expected.keys) == Set(AppdError.Code.allCases))
        for code in AppdError.Code.allCases {
            #expect(code.httpStatus == expected[code], "\(code)")
        }
    }

    @Test("errno names come from glibc, every value it knows, not a hand-kept few")
    func errnoNames() {
        #expect(errnoName(EACCES) == "EACCES")
        #expect(errnoName(ECONNREFUSED) == "ECONNREFUSED")
        #expect(errnoName(EPROTOTYPE) == "EPROTOTYPE")
        #expect(errnoName(ENOBUFS) == "ENOBUFS")
        #expect(errnoName(4095) == "errno 4095")
        #expect(errnoText(ENOENT) == "ENOENT (No such file or directory)")
        let error = AppdError.system("open /x", errno: EROFS)
        #expect(error.code == .io && error.errno == EROFS)
        #expect(error.message == "open /x: EROFS (Read-only file system)")
    }

    @Test("a status without an error body reads as the code the one map sends it with")
    func codeForStatus() {
        for code in AppdError.Code.allCases {
            #expect(
                AppdError.Code(status: code.httpStatus).httpStatus == code.httpStatus, "\(code)")
        }
        #expect(AppdError.Code(status: 400) == .badRequest)
        #expect(AppdError.Code(status: 409) == .conflict)
        #expect(AppdError.Code(status: 418) == .badRequest)
        #expect(AppdError.Code(status: 502) == .internal)
    }

    /// As the daemon sends an install refused by the archive it was streamed.
    static let chained = AppdError(
        .invalidBundle, "not a valid app bundle (1 problem)",
        subject: .init(.bundle, "Info.plist", view: "/var/lib/appd/incoming/1/Notes.app"),
        problems: [BundleProblem("Info.plist", "CFBundleExecutable 'Notes' does not exist")],
        hint: "rebuild it",
        cause: AppdError.system("read", errno: EIO, subject: .init(.archive)))

    @Test(
        "the wire form is the Codable form: subject and cause survive, the sender's view does not")
    func codableRoundTrip() throws {
        let wire = try JSONEncoder().encode(Self.chained)
        let text = String(decoding: wire, as: UTF8.self)
        #expect(!text.contains("/var/lib/appd"), "\(text)")
        let object = try JSONSerialization.jsonObject(with: wire) as? [String: Any]
        #expect(object?["code"] as? String == "invalidBundle")
        #expect(object?["message"] as? String == "not a valid app bundle (1 problem)")
        #expect(
            (object?["subject"] as? [String: String]) == ["root": "bundle", "path": "Info.plist"])
        let received = try JSONDecoder().decode(AppdError.self, from: wire)
        var expected = Self.chained
        expected.subject?.view = nil
        #expect(received == expected)
        #expect(received.cause?.errno == EIO && received.cause?.subject == .init(.archive))
        // An older body (no subject, no cause, no problems) and a newer daemon's code.
        let old = try JSONDecoder().decode(
            AppdError.self, from: Data(#"{"code":"teapot","message":"x","hint":"h"}"#.utf8))
        #expect(old == AppdError(.internal, "x", hint: "h"))
        #expect(old.code.httpStatus == 500)
    }

    @Test("a subject is shown against the reader's view of its root; the message is never changed")
    func subjectRendering() {
        let sent = AppdError(
            .invalidBundle, "is not a regular file", subject: .init(.bundle, "Info.plist"),
            cause: AppdError(.invalidBundle, "entry 'x' is a hard link", subject: .init(.archive)))
        #expect(sent.headline == "the bundle: Info.plist: is not a regular file")
        let seen = sent.viewing(.bundle, as: "../build/Notes.app").viewing(
            .archive, as: "Notes.tar")
        #expect(seen.message == sent.message)
        #expect(seen.headline == "../build/Notes.app/Info.plist: is not a regular file")
        #expect(seen.cause?.headline == "Notes.tar: entry 'x' is a hard link")
        #expect("\(seen)".contains("because: Notes.tar: entry 'x' is a hard link"))
        // The bundle itself, and an archive member shown as `file:folder`.
        #expect(
            AppdError(.notFound, "no such bundle directory", subject: .init(.bundle))
                .viewing(.bundle, as: "Gone.app").headline == "Gone.app: no such bundle directory")
        #expect(
            AppdError(.invalidBundle, "bad", subject: .init(.bundle, "Info.plist"))
                .viewing(.bundle, as: "N.ipa:").headline == "N.ipa:Info.plist: bad")
    }

    @Test("valueOrErrno retries EINTR, returns other errors, and the value")
    func retry() throws {
        var calls = 0
        let value = valueOrErrno { () -> Int32 in
            calls += 1
            if calls < 3 {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(calls == 3)
        #expect(try value.get() == 7)
        calls = 0
        let failed = valueOrErrno { () -> Int32 in
            calls += 1
            errno = EBADF
            return -1
        }
        #expect(calls == 1)
        #expect(throws: Errno(rawValue: EBADF)) { try failed.get() }
        calls = 0
        let once = valueOrErrno(retryOnInterrupt: false) { () -> Int32 in
            calls += 1
            errno = EINTR
            return -1
        }
        #expect(calls == 1)
        #expect(throws: Errno.interrupted) { try once.get() }
        #expect(
            retryingInterrupts { () -> Int in
                calls += 1
                errno = calls < 5 ? EINTR : EIO
                return -1
            } == -1)
        #expect(errno == EIO)
    }

    @Test("writeAll and readAll move every byte through a pipe, and readAll stops at its limit")
    func pipeRoundTrip() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try bytes.withUnsafeBytes { try writeAll(fds[1], $0).get() }
        close(fds[1])
        #expect(try readAll(fds[0], limit: 1_000).get() == Array(bytes.prefix(1_000)))
        #expect(try readAll(fds[0], limit: 1 << 20).get() == Array(bytes.dropFirst(1_000)))
        #expect(throws: Errno(rawValue: EBADF)) { try readAll(-1, limit: 10).get() }
    }

    @Test("the calendar agrees with gmtime_r and timegm over 400 years and both sides of 1970")
    func calendar() {
        var generator = SystemRandomNumberGenerator()
        let samples: [Int64] =
            [0, -1, 86_399, 86_400, 951_782_400, 4_107_542_400, -12_212_553_600, 253_402_300_799]
            + (0..<2_000).map { _ in
                Int64.random(in: -12_212_553_600...253_402_300_799, using: &generator)
            }
        for seconds in samples {
            var t = time_t(seconds)
            var parts = tm()
            _ = gmtime_r(&t, &parts)
            let time = UTCTime(secondsSince1970: seconds)
            #expect(
                time.year == Int(parts.tm_year) + 1900 && time.month == Int(parts.tm_mon) + 1,
                "\(seconds)")
            #expect(time.day == Int(parts.tm_mday) && time.hour == Int(parts.tm_hour), "\(seconds)")
            #expect(
                time.minute == Int(parts.tm_min) && time.second == Int(parts.tm_sec), "\(seconds)")
            #expect(time.isValid)
            #expect(time.secondsSince1970 == seconds)
            #expect(Int64(timegm(&parts)) == seconds)
        }
        #expect(UTCTime(secondsSince1970: 0).description == "1970-01-01T00:00:00Z")
        #expect(
            UTCTime(secondsSince1970: 951_782_400).text(separator: " ") == "2000-02-29 00:00:00")
    }

    @Test("fields reads the fixed-width text, refuses anything else, and isValid checks ranges")
    func fields() {
        #expect(
            UTCTime.fields(Array("2026-11-26T22:40:05Z".utf8))
                == UTCTime(year: 2026, month: 11, day: 26, hour: 22, minute: 40, second: 5))
        for bad in [
            "2026-11-26T22:40", "2026/11/26T22:40:05", "2026-1a-26T22:40:05", "",
            "+026-11-26T22:40:05",
        ] {
            #expect(UTCTime.fields(Array(bad.utf8)) == nil, "\(bad)")
        }
        #expect(!UTCTime(year: 2025, month: 2, day: 29).isValid)
        #expect(UTCTime(year: 2024, month: 2, day: 29).isValid)
        #expect(!UTCTime(year: 2024, month: 13, day: 1).isValid)
        #expect(!UTCTime(year: 2024, month: 1, day: 1, hour: 24).isValid)
        // Rolls over as timegm does: hour 24 is the next day.
        #expect(
            UTCTime(year: 2024, month: 1, day: 1, hour: 24).secondsSince1970
                == UTCTime(year: 2024, month: 1, day: 2).secondsSince1970)
        #expect(UTCTime.number(Array("123456789012345678901".utf8)) == nil)
        #expect(UTCTime.digits(-5, 3) == "-05")
    }
}
