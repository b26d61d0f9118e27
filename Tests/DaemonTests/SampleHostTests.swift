import Foundation
import Testing

/// Issue 38: the samples run on a host without the Swift toolchain. The Hello that
/// scripts/build-sample makes (its runtime in Frameworks/) under a daemon with the default
/// `[Sandbox] SystemPaths` (/usr), in a mount namespace whose toolchain folder is an empty tmpfs.
@Suite("the samples on a host without the toolchain", .serialized, rootOnly)
struct DaemonSampleTests {
    @Test("Hello as scripts/build-sample makes it installs and runs where /opt/swift is empty")
    func helloWithoutToolchain() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
        let apps = try makeTemporaryDirectory("/var/tmp/appd-sample-apps.XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: apps) }
        let built = try runTool("/bin/bash", ["\(repository)/scripts/build-sample", "Hello", apps])
        #expect(built.code == 0, "\(built.output)")
        let sample = "\(apps)/Hello.app"

        // The daemon's own libraries (a debug build links the toolchain's runtime) come from a
        // copy the apps never see; the toolchain itself is hidden beneath an empty tmpfs.
        let hidden = try HiddenToolchain()
        defer { hidden.remove() }
        let toolchain = hidden.toolchain
        let daemon = try TestDaemon(wrapper: hidden.wrapper, toolchain: false)
        let pid = try #require(daemon.daemon.pid)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/root\(toolchain)")
                .isEmpty)

        // What depends on the toolchain is refused there: Hello as `swift build` links it.
        let linked = "\(daemon.directory)/src-linked/Hello.app"
        try FileManager.default.createDirectory(
            atPath: "\(daemon.directory)/src-linked", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: sample, toPath: linked)
        try FileManager.default.removeItem(atPath: "\(linked)/Frameworks")
        try FileManager.default.removeItem(atPath: "\(linked)/Hello")
        try FileManager.default.copyItem(
            atPath: builtExecutable("Hello"), toPath: "\(linked)/Hello")
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, linked])
        let refused = try daemon.run("appd", ["install", linked])
        #expect(refused.code == 1, "\(refused.output)")
        #expect(
            refused.output.contains("Hello: needs the library")
                && refused.output.contains("the library libswiftCore.so")
                && refused.output.contains("found neither in the bundle nor on this host"),
            "\(refused.output)")

        // The sample carries its runtime: it installs, runs and reads its own resources.
        try TestDaemon.tool(["sign", "--key", daemon.signingKey, sample])
        let installed = try daemon.run("appd", ["install", sample])
        #expect(installed.code == 0, "\(installed.output)")
        let instance = try daemon.launch("com.example.hello", [])
        let ended = try daemon.wait(instance.id)
        let log = try daemon.logs(instance.id)
        #expect(ended.exit?.code == 0, "\(log)")
        let greeting = try String(
            contentsOfFile: "\(repository)/Examples/Hello/greeting.txt", encoding: .utf8)
        #expect(log.contains(greeting.trimmingCharacters(in: .whitespacesAndNewlines)), "\(log)")
        #expect(log.contains("bundle id: com.example.hello"), "\(log)")
    }
}
