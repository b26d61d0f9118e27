import AppdAPI
import AppdClient
import Foundation
import Testing

/// The daemon installs through the same AppStore as `--no-daemon`: what it enforces, it
/// enforces for every client.
@Suite("the daemon enforces code signatures at install and at launch", .serialized, rootOnly)
struct SigningTests {
    @Test(
        "an unsigned bundle is refused through the daemon; a signed one installs and records its signer"
    )
    func unsignedRefused() throws {
        let daemon = try TestDaemon()
        let bundle = try daemon.makeProbe("com.example.unsigned")
        let result = try daemon.run("appd", ["install", bundle])
        #expect(result.code == 1)
        #expect(
            result.output.contains(
                "com.example.unsigned is not signed; appd installs signed bundles only"))
        #expect(try daemon.client.get("/v1/apps", as: [APIApp].self).isEmpty)

        try daemon.installProbe("com.example.signed")
        let app = try daemon.client.get("/v1/apps/com.example.signed", as: APIApp.self)
        #expect(app.signer?.count == 16)
    }

    @Test("a bundle container changed on disk after install is refused at launch, naming the file")
    func tamperedContainer() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.tampered")
        let instance = try daemon.launch("com.example.tampered", ["exit", "0"])
        #expect(try daemon.wait(instance.id).exit?.code == 0)

        let app = try daemon.client.get("/v1/apps/com.example.tampered", as: APIApp.self)
        let executable = "\(try #require(app.bundlePath))/Probe"
        chmod(executable, 0o755)
        let handle = try #require(FileHandle(forWritingAtPath: executable))
        handle.seekToEndOfFile()
        handle.write(Data("appended".utf8))
        try handle.close()
        chmod(executable, 0o555)

        let launch = try daemon.run(
            "appctl", ["--socket", daemon.socket, "launch", "com.example.tampered"])
        #expect(launch.code == 1)
        #expect(launch.output.contains("was changed after it was installed; refusing to launch it"))
        #expect(launch.output.contains("Probe: was changed after signing"))
        #expect(try daemon.client.get("/v1/instances?all=1", as: [APIInstance].self).count == 1)
    }
}
