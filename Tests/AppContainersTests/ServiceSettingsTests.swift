import AppdBase
import Foundation
import Testing

@testable import AppContainers
@testable import AppdConfig

@Suite("[App ID] services: RunAtLoad, KeepAlive, Arguments, Environment")
struct ServiceSettingsTests {
    func parse(_ body: String) throws -> ServiceSettings {
        let config = try AppdConfiguration.parse(
            "[App com.example.server]\n" + body, file: "t.conf")
        return try #require(config.override(for: "com.example.server")).service
    }

    @Test(
        "the keys are read; Arguments= splits quoted words; Environment= keeps the last value of a name"
    )
    func values() throws {
        let service = try parse(
            "RunAtLoad=yes\nKeepAlive=on-failure\nArguments=serve 8080 \"two words\" 'it''s' a\\ b\n"
                + "Environment=GREETING=hi \"MOTTO=one two\" GREETING=hello LANG=de_DE.UTF-8\n")
        #expect(service.runAtLoad)
        #expect(service.keepAlive == .onFailure)
        #expect(service.arguments == ["serve", "8080", "two words", "its", "a b"])
        #expect(
            service.environment.map { "\($0.name)=\($0.value)" } == [
                "MOTTO=one two", "GREETING=hello", "LANG=de_DE.UTF-8",
            ])
        #expect(try parse("KeepAlive=yes\n").keepAlive == .yes)
        #expect(try parse("KeepAlive=no\n").isEmpty)
        // An empty Arguments= is set (no arguments), not absent.
        #expect(try parse("Arguments=\n").arguments == [])
    }

    @Test("appd override writes back what it read: the lines round-trip")
    func roundTrip() throws {
        let text = "RunAtLoad=yes\nKeepAlive=yes\nArguments=serve \"a b\"\nEnvironment=X=\"1 2\"\n"
        let config = try AppdConfiguration.parse(
            "[App com.example.server]\n" + text, file: "t.conf")
        let override = try #require(config.override(for: "com.example.server"))
        let lines = override.lines.map { "\($0.key)=\($0.value)\n" }.joined()
        #expect(lines == text)
        let again = try AppdConfiguration.parse(
            "[App com.example.server]\n" + lines, file: "t.conf")
        #expect(again.override(for: "com.example.server") == override)
        #expect(
            again.override(for: "com.example.server")?.service.environment.first?.value == "1 2")
    }

    @Test(
        "names the sandbox sets, bad names, unended quotes and huge values are refused, naming the problem",
        arguments: [
            ("Environment=HOME=/tmp\n", "HOME is set by the sandbox and cannot be replaced"),
            ("Environment=APPD_LIFECYCLE_FD=9\n", "APPD_LIFECYCLE_FD is set by the sandbox"),
            ("Environment=LD_PRELOAD=/x.so\n", "LD_PRELOAD is set by the sandbox"),
            ("Environment=PATH=/x\n", "PATH is set by the sandbox"),
            ("Environment=1X=y\n", "'1X' is not a variable name"),
            ("Environment=novalue\n", "'novalue' has no '='"),
            ("Arguments=\"open\n", "a quote without its end"),
            ("Arguments=x\\\n", "a \\ at the end"),
            ("KeepAlive=always\n", "is not yes, no or on-failure"),
            ("RunAtLoad=maybe\n", "is not yes or no"),
            ("Arguments=" + String(repeating: "x", count: 5000) + "\n", "a word over 4096 bytes"),
            ("Arguments=" + String(repeating: "x ", count: 300) + "\n", "more than 256 words"),
            ("Arguments=a\u{1}b\n", "a control character"),
        ])
    func refused(_ body: String, _ message: String) throws {
        let error = #expect(throws: AppdError.self) { try parse(body) }
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
        #expect(
            error?.message.hasPrefix("t.conf:2: [App com.example.server]") == true,
            "\(error?.message ?? "")")
    }

    @Test("[Lifecycle] KeepAlive backoff: doubles from KeepAliveDelay, capped at 300 s")
    func backoff() throws {
        let config = try AppdConfiguration.parse(
            "[Lifecycle]\nKeepAliveDelay=0.5\nKeepAliveLimit=3\nKeepAliveStableTime=10\n",
            file: "t.conf")
        #expect(config.lifecycle.keepAliveLimit == 3)
        #expect(config.lifecycle.keepAliveStableTime == 10)
        #expect((1...4).map(config.lifecycle.keepAliveDelay(attempt:)) == [0.5, 1, 2, 4])
        #expect(config.lifecycle.keepAliveDelay(attempt: 1000) == 300)
        #expect(throws: AppdError.self) {
            try AppdConfiguration.parse("[Lifecycle]\nKeepAliveLimit=0\n", file: "t.conf")
        }
    }
}
