import AppdAPI
import AppdClient
import Foundation
import Testing

/// Issue 40: the URL schemes and document types an app claims in its signed Info.plist, as
/// its signer grants them (`[Signer] URLSchemes=`, `DocumentTypes=`), through a real install.
@Suite("apps claim URL schemes and document types their signer grants", .serialized, rootOnly)
struct HandlerTests {
    static let schemes = """
        <key>CFBundleURLTypes</key><array><dict>
        <key>CFBundleURLName</key><string>com.example.notes</string>
        <key>CFBundleURLSchemes</key><array><string>notes</string></array></dict></array>
        """
    static let documents = """
        <key>CFBundleDocumentTypes</key><array><dict>
        <key>CFBundleTypeRole</key><string>Editor</string>
        <key>LSItemContentTypes</key><array><string>public.plain-text</string></array></dict></array>
        """
    /// A second section of the test key: the notes app may claim `notes:` and text.
    static let grant =
        "[Signer notes]\nKey=test.public-key\nBundleIDs=com.example.notes\nURLSchemes=notes\nDocumentTypes=text/plain .txt .text\n"

    func install(_ daemon: TestDaemon, _ id: String, info: String) throws -> (
        code: Int32, output: String
    ) {
        let bundle = try daemon.makeProbe(id, info: info)
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, bundle])
        return try daemon.run("appd", ["install", bundle])
    }

    @Test(
        "a scheme or a type the signer does not grant is refused at install, naming the key and the claim"
    )
    func claimWithoutGrant() throws {
        let daemon = try TestDaemon(config: Self.grant)
        let scheme = try install(
            daemon, "com.example.rogue",
            info: Self.schemes.replacingOccurrences(of: ">notes<", with: ">https<"))
        #expect(scheme.code == 1)
        #expect(
            scheme.output.contains(
                "com.example.rogue claims URL schemes in CFBundleURLTypes (Info.plist) that signer 'test'"
            ) && scheme.output.contains("may not grant: https"), "\(scheme.output)")
        // The same claim the notes app's signer grants, by another id the grant does not cover.
        let type = try install(daemon, "com.example.other", info: Self.documents)
        #expect(type.code == 1)
        #expect(
            type.output.contains("claims document types in CFBundleDocumentTypes (Info.plist)")
                && type.output.contains("may not grant: text/plain, .txt, .text"), "\(type.output)")
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty)
    }

    @Test("a malformed entry is refused naming the key and its index, by sign and by install")
    func malformed() throws {
        let daemon = try TestDaemon(config: Self.grant)
        let bundle = try daemon.makeProbe(
            "com.example.notes",
            info: Self.schemes.replacingOccurrences(of: ">notes<", with: ">no way<"))
        let expected = "CFBundleURLTypes[0].CFBundleURLSchemes[0] 'no way' is not a URL scheme"
        let sign = try daemon.run("appd", ["sign", "--key", daemon.signingKey, bundle])
        #expect(sign.code != 0 && sign.output.contains(expected), "\(sign.output)")
        let install = try daemon.run("appd", ["install", bundle])
        #expect(install.code == 1 && install.output.contains(expected), "\(install.output)")
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty)
    }

    @Test("granted claims install, and appd info and appd verify show them")
    func grantedShown() throws {
        let daemon = try TestDaemon(config: Self.grant)
        let result = try install(
            daemon, "com.example.notes", info: Self.schemes + Self.documents)
        #expect(result.code == 0, "\(result.output)")
        let app = try daemon.client.get("/v1/apps/com.example.notes", as: APIApp.self)
        #expect(app.urlSchemes == ["notes"])
        let type = try #require(app.documentTypes?.first)
        #expect(type.role == "Editor" && type.extensions == ["txt", "text"])
        #expect(type.mimeTypes == ["text/plain"] && type.contentTypes == ["public.plain-text"])
        let info = try daemon.run("appd", ["info", "com.example.notes"])
        #expect(info.output.contains("opens URLs  notes:"), "\(info.output)")
        #expect(info.output.contains("opens       Editor: .txt .text text/plain"), "\(info.output)")
        let verify = try daemon.run(
            "appd",
            [
                "verify", "--config", daemon.configPath,
                "\(daemon.directory)/src-com.example.notes/Probe.app",
            ])
        #expect(verify.output.contains("opens URLs  notes:"), "\(verify.output)")
        #expect(
            verify.output.contains("opens       Editor: .txt .text text/plain"), "\(verify.output)")
    }
}
