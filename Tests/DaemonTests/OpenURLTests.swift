import AppdAPI
import AppdClient
import Foundation
import Testing

/// Issue 40 §2: `appctl open URL` through a real daemon: the handler chosen by the rule, the
/// admin's `[Handlers]`, `--with`, and the URL as the app's last argument.
@Suite("appctl open picks the app that claims a URL's scheme", .serialized, rootOnly)
struct OpenURLTests {
    static let config = """
        [App com.example.first]
        Arguments=exit 3
        [App com.example.second]
        Arguments=exit 4
        [Signer handlers]
        Key=test.public-key
        BundleIDs=com.example.*
        URLSchemes=notes

        """

    func install(_ daemon: TestDaemon, _ id: String, claims: Bool) throws {
        try daemon.installProbe(id, info: claims ? HandlerTests.schemes : "")
    }

    func open(_ daemon: TestDaemon, _ arguments: [String]) throws -> (code: Int32, output: String) {
        try daemon.run("appctl", ["--socket", daemon.socket, "open"] + arguments)
    }

    @Test(
        "of two apps claiming a scheme the first installed opens it, unless [Handlers] or --with names the other"
    )
    func twoHandlers() throws {
        let daemon = try TestDaemon(config: Self.config)
        try install(daemon, "com.example.first", claims: true)
        try install(daemon, "com.example.second", claims: true)
        try install(daemon, "com.example.none", claims: false)

        let first = try open(daemon, ["--json", "notes:today"])
        #expect(first.code == 0, "\(first.output)")
        let result = try APICoding.decoder().decode(
            APIOpenResult.self, from: Data(first.output.utf8))
        #expect(result.app == "com.example.first" && result.chosenBy == "rule")
        #expect(result.kind == "url" && result.instance.arguments == ["exit", "3", "notes:today"])
        #expect(try daemon.wait(result.instance.id).exit?.code == 3)

        let named = try open(daemon, ["--with", "com.example.second", "--json", "notes:x"])
        let second = try APICoding.decoder().decode(
            APIOpenResult.self, from: Data(named.output.utf8))
        #expect(second.app == "com.example.second" && second.chosenBy == "named")
        #expect(try daemon.wait(second.instance.id).exit?.code == 4)

        let refused = try open(daemon, ["--with", "com.example.none", "notes:x"])
        #expect(refused.code == 1)
        #expect(
            refused.output.contains(
                "com.example.none does not open the URL scheme notes:: its Info.plist does not claim it (CFBundleURLTypes)"
            ), "\(refused.output)")
        let unclaimed = try open(daemon, ["mailto:someone@example.com"])
        #expect(unclaimed.code == 1)
        #expect(unclaimed.output.contains("no installed app opens the URL scheme mailto:"))

        // The admin's choice comes first once appd.conf says so.
        let text = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        try (text + "\n[Handlers]\nURLSchemes=notes=com.example.second\n").write(
            toFile: daemon.configPath, atomically: true, encoding: .utf8)
        _ = try daemon.client.post("/v1/reload", as: APIReloadResult.self)
        let admin = try open(daemon, ["--json", "NOTES:later"])
        let chosen = try APICoding.decoder().decode(
            APIOpenResult.self, from: Data(admin.output.utf8))
        #expect(chosen.app == "com.example.second" && chosen.chosenBy == "[Handlers]")
        #expect(chosen.instance.arguments.last == "NOTES:later")
        #expect(try daemon.wait(chosen.instance.id).exit?.code == 4)

        // A grant taken away by a reload takes the claim with it: nobody opens notes: now.
        let revoked = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            .replacingOccurrences(of: "URLSchemes=notes\n", with: "")
        try revoked.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        _ = try daemon.client.post("/v1/reload", as: APIReloadResult.self)
        let gone = try open(daemon, ["notes:again"])
        #expect(gone.code == 1)
        #expect(
            gone.output.contains("no installed app opens the URL scheme notes:"), "\(gone.output)")
    }
}
