import Foundation
import Glibc
import TestSupport
import Testing

/// `POST /v1/apps` takes a tar stream from a caller the daemon must not trust: whatever it
/// sends, a failed install leaves nothing in `<root>/incoming`, nothing outside it, and no app.
extension DaemonRobustnessTests {
    /// Archives the extractor must refuse; each aims at `/var/tmp/<outside>`.
    static let hostileArchives: [HostileArchive] = [
        HostileArchive("a ../ path climbing out of the bundle") { outside in
            tarArchive([.file(String(repeating: "../", count: 20) + "var/tmp/\(outside)", "pwned")])
        },
        HostileArchive("an absolute path") { outside in
            tarArchive([.file("/var/tmp/\(outside)", "pwned")])
        },
        HostileArchive("a symlink out, then a file through it") { outside in
            tarArchive([.symlink("out", to: "/var/tmp"), .file("out/\(outside)", "pwned")])
        },
        HostileArchive("a hard link to a file outside") { outside in
            tarArchive([TarEntry(name: "Info.plist", type: "1", link: "/etc/shadow")])
        },
        HostileArchive("an archive cut off inside a file") { _ in
            Array(
                tarArchive([.file("Info.plist", String(repeating: "x", count: 5000))]).prefix(2048))
        },
    ]

    @Test("an install with the wrong Content-Type is 415")
    func installWrongType() throws {
        let archive = try probeBundleArchive()
        for type in ["application/json", "text/plain", nil] {
            let response = try install(archive, name: "Probe.app", contentType: type)
            #expect(response.status == 415, "Content-Type \(type ?? "none")")
            #expect(response.errorCode == "unsupportedMediaType")
        }
        try expectNothingInstalled()
        daemon.expectServing()
    }

    @Test("an install without name=, or with a name that is not Name.app, is 400 badRequest")
    func installBadName() throws {
        let archive = try probeBundleArchive()
        for name in [nil, "", "Probe", ".app", "..%2FProbe.app", "a%2FProbe.app", ".hidden.app"] {
            #expect(
                outcome(try install(archive, name: name)) == "400 badRequest",
                "name=\(name ?? "(none)")")
        }
        try expectNothingInstalled()
        daemon.expectServing()
    }

    @Test("an install whose body is no tar archive is 400 invalidBundle and leaves nothing behind")
    func installGarbage() throws {
        var generator = SeededGenerator(seed: 7)
        let garbage = (0..<100_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        #expect(outcome(try install(garbage, name: "Probe.app")) == "400 invalidBundle")
        #expect(outcome(try install([], name: "Probe.app")) == "400 invalidBundle")
        try expectNothingInstalled()
        daemon.expectServing()
    }

    @Test(
        "a hostile archive is 400 invalidBundle, writes nothing outside, leaves nothing behind",
        arguments: hostileArchives)
    func installHostile(_ archive: HostileArchive) throws {
        let outside = "appd-robustness-escaped-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: "/var/tmp/\(outside)") }
        #expect(
            outcome(try install(archive.bytes(outside), name: "Evil.app")) == "400 invalidBundle")
        #expect(
            !FileManager.default.fileExists(atPath: "/var/tmp/\(outside)"),
            "written outside the bundle")
        try expectNothingInstalled()
        daemon.expectServing()
    }

    @Test("an install whose client goes away halfway leaves nothing in incoming")
    func installAbandoned() throws {
        let archive = try probeBundleArchive()
        do {
            let wire = try daemon.connect()
            wire.send(
                "POST /v1/apps?name=Probe.app HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-tar\r\n"
                    + "Content-Length: \(archive.count)\r\n\r\n")
            wire.send(Array(archive.prefix(archive.count / 2)))
            #expect(
                try eventually { try incomingEntries().count == 1 },
                "the install had not started")
        }  // The connection closes here, in the middle of the body.
        let deadline = Date(timeIntervalSinceNow: 5)
        while try !incomingEntries().isEmpty && Date() < deadline { usleep(50_000) }
        try expectNothingInstalled()
        daemon.expectServing()
    }

    @Test("the same route installs an honest archive: the failures above are the archives' fault")
    func installHonest() throws {
        let response = try install(try probeBundleArchive(), name: "Probe.app")
        #expect(response.status == 201, "\(String(decoding: response.body, as: UTF8.self))")
        let apps = try daemon.request("GET", "/v1/apps").json as? [[String: Any]]
        #expect(apps?.map { $0["bundleId"] as? String } == ["com.example.probe"])
        #expect(try incomingEntries().isEmpty)
        daemon.expectServing()
    }

    // MARK: Helpers

    func install(_ archive: [UInt8], name: String?, contentType: String? = "application/x-tar")
        throws
        -> HTTPResponse
    {
        try daemon.request(
            "POST", "/v1/apps" + (name.map { "?name=\($0)" } ?? ""), body: archive,
            headers: contentType.map { [("Content-Type", $0)] } ?? [])
    }

    func incomingEntries() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: "\(daemon.root)/incoming")
    }

    func expectNothingInstalled(sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try incomingEntries() == [], "left in incoming/", sourceLocation: sourceLocation)
        let apps = try daemon.request("GET", "/v1/apps")
        #expect(
            apps.status == 200 && (apps.json as? [Any])?.isEmpty == true,
            "GET /v1/apps: \(String(decoding: apps.body, as: UTF8.self))",
            sourceLocation: sourceLocation)
    }
}

/// An archive made to break out of the bundle, given the name of a file to aim at outside.
struct HostileArchive: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: @Sendable (String) -> [UInt8]

    init(_ name: String, _ bytes: @escaping @Sendable (String) -> [UInt8]) {
        self.name = name
        self.bytes = bytes
    }

    var testDescription: String { name }
}
