import AppdAPI
import AppdClient
import Foundation
import Testing

/// An ext4 filesystem in a file, on a loop device, mounted under /var/tmp; with `quota`, made
/// with the project quota feature and mounted with prjquota. Everything it made (mount, loop
/// device, image) is undone when the value goes away, and by init itself when a step fails.
final class LoopFilesystem {
    let directory: String
    var mountPoint: String { "\(directory)/mnt" }
    private var image: String { "\(directory)/fs.img" }
    private(set) var device: String?
    private(set) var mounted = false

    init(sizeMiB: Int, quota: Bool) throws {
        var template = Array("/var/tmp/appd-loopfs.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw POSIXError(.EIO)
        }
        directory = String(
            decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        do {
            try Self.must("/usr/bin/truncate", ["-s", "\(sizeMiB)M", image])
            try Self.must(
                "/usr/sbin/mkfs.ext4",
                ["-q", "-F"] + (quota ? ["-O", "quota,project", "-E", "quotatype=prjquota"] : [])
                    + [image])
            let loop = try TestDaemon.run("/usr/sbin/losetup", ["--find", "--show", image])
            guard loop.code == 0 else { throw DaemonFailure("losetup: \(loop.output)") }
            device = loop.output.trimmingCharacters(in: .whitespacesAndNewlines)
            try FileManager.default.createDirectory(
                atPath: mountPoint, withIntermediateDirectories: true)
            try Self.must(
                "/usr/bin/mount", (quota ? ["-o", "prjquota"] : []) + [device ?? "", mountPoint])
            mounted = true
            chmod(mountPoint, 0o755)
        } catch {
            cleanUp()
            throw error
        }
    }

    deinit { cleanUp() }

    private func cleanUp() {
        if mounted {
            // A process still inside (an app the test left) must not keep the loop device: a
            // lazy unmount detaches it from the tree now and frees it when the last one leaves.
            if (try? TestDaemon.run("/usr/bin/umount", [mountPoint]))?.code != 0 {
                _ = try? TestDaemon.run("/usr/bin/umount", ["-l", mountPoint])
            }
            mounted = false
        }
        if let device { _ = try? TestDaemon.run("/usr/sbin/losetup", ["-d", device]) }
        device = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func must(_ tool: String, _ arguments: [String]) throws {
        let result = try TestDaemon.run(tool, arguments)
        guard result.code == 0 else {
            throw DaemonFailure("\(tool) \(arguments.joined(separator: " ")): \(result.output)")
        }
    }

    /// Whether this kernel can enforce ext4 project quotas at all: without CONFIG_QUOTA and
    /// CONFIG_QFMT_V2 (the format of ext4's hidden quota files) ext4 refuses to mount a
    /// filesystem with the quota feature ("The kernel was not built with CONFIG_QUOTA and
    /// CONFIG_QFMT_V2"). On such a machine run it in a VM on a stock Debian kernel:
    /// scripts/vm-run 'cd REPO && APPD_REQUIRE_ROOT_TESTS=1 .build/debug/appdPackageTests.xctest
    /// --testing-library swift-testing --filter DiskQuotaTests'.
    static var kernelHasQuota: Bool {
        guard FileManager.default.fileExists(atPath: "/proc/config.gz"),
            let config = try? TestDaemon.run("/usr/bin/zcat", ["/proc/config.gz"]), config.code == 0
        else { return true }  // unknown: let the test try, and fail loudly if it cannot
        return config.output.contains("\nCONFIG_QUOTA=y")
            && config.output.contains("\nCONFIG_QFMT_V2=")
    }
}

/// Issue 13 §6: one app must not fill the state root's filesystem.
@Suite("[Sandbox] DataQuota limits each data container", .serialized, rootOnly)
struct DiskQuotaTests {
    static func dataPath(_ daemon: TestDaemon, _ id: String) throws -> String {
        try daemon.client.get("/v1/apps/\(id)/containers/data", as: APIContainer.self).path
    }

    static func run(_ daemon: TestDaemon, _ id: String, _ arguments: [String]) throws -> String {
        let instance = try daemon.launch(id, arguments)
        _ = try daemon.wait(instance.id)
        return try daemon.logs(instance.id)
    }

    /// The bytes `disk-fill` wrote.
    static func filled(_ output: String) -> Int? {
        output.split(separator: "\n").first { $0.hasPrefix("disk-fill: value ") }
            .flatMap { Int($0.dropFirst("disk-fill: value ".count)) }
    }

    @Test("an app cannot clear the project-inherit flag or change its project id (seccomp)")
    func escapeRefused() throws {
        let daemon = try TestDaemon(config: "[Sandbox]\nDataQuota=16M\n")
        try daemon.installProbe("com.example.escape")
        let home = try Self.dataPath(daemon, "com.example.escape")
        let output = try Self.run(
            daemon, "com.example.escape", ["disk-escape", "\(home)/Documents"])
        #expect(output.contains("disk-escape-setflags: refused EPERM"), "\(output)")
        #expect(output.contains("disk-escape-fssetxattr: refused EPERM"), "\(output)")
    }

    @Test(
        "where the state root's filesystem has no project quotas, appd profile and appd doctor say DataQuota is not enforced"
    )
    func notEnforcedIsSaid() throws {
        // A plain ext4 without the quota feature: on any kernel, quotas cannot be enforced.
        let fs = try LoopFilesystem(sizeMiB: 64, quota: false)
        let daemon = try TestDaemon(
            config: "[Sandbox]\nDataQuota=16M\n", root: "\(fs.mountPoint)/root")
        defer {
            withExtendedLifetime(daemon) {}
            withExtendedLifetime(fs) {}
        }
        try daemon.installProbe("com.example.plain")
        let profile = try daemon.run(
            "appd", ["profile", "--config", daemon.configPath, "com.example.plain"])
        #expect(profile.code == 0, "\(profile.output)")
        #expect(profile.output.contains("data container: 16M NOT ENFORCED: "), "\(profile.output)")
        let json = try daemon.run(
            "appd", ["profile", "--json", "--config", daemon.configPath, "com.example.plain"])
        #expect(
            json.output.contains("\"enforced\" : false")
                || json.output.contains("\"enforced\":false"), "\(json.output)")
        let doctor = try daemon.run("appd", ["doctor", "--config", daemon.configPath])
        #expect(
            doctor.output.contains("[Sandbox] DataQuota=16777216 is NOT ENFORCED: "),
            "\(doctor.output)")

        // Without DataQuota= nothing is claimed either way.
        let unset = try daemon.run("appd", ["profile", "com.example.plain"])
        #expect(unset.output.contains("data container: no limit"), "\(unset.output)")
    }

    @Test(
        "on ext4 with project quotas an app's writes stop at DataQuota with EDQUOT; other apps and appd keep working; the limit holds across a restart and an upgrade",
        .enabled(
            if: LoopFilesystem.kernelHasQuota,
            "the kernel lacks CONFIG_QUOTA or CONFIG_QFMT_V2: ext4 cannot mount a filesystem with the quota feature"
        ))
    func enforced() throws {
        let fs = try LoopFilesystem(sizeMiB: 160, quota: true)
        let daemon = try TestDaemon(
            config: "[Sandbox]\nDataQuota=16M\n", root: "\(fs.mountPoint)/root")
        defer {
            withExtendedLifetime(daemon) {}
            withExtendedLifetime(fs) {}
        }
        try daemon.installProbe("com.example.filler")
        try daemon.installProbe("com.example.neighbour")
        let home = try Self.dataPath(daemon, "com.example.filler")

        let profile = try daemon.run(
            "appd", ["profile", "--config", daemon.configPath, "com.example.filler"])
        #expect(profile.output.contains("data container: 16M (project quota"), "\(profile.output)")

        let fill = try Self.run(
            daemon, "com.example.filler", ["disk-fill", "\(home)/Documents/big"])
        #expect(fill.contains("disk-fill: refused EDQUOT"), "\(fill)")
        let written = try #require(Self.filled(fill))
        #expect(written > 14 << 20 && written <= 16 << 20, "wrote \(written) bytes")
        // Its tmp is in the same project.
        let tmp = try Self.run(daemon, "com.example.filler", ["disk-fill", "\(home)/tmp/more"])
        #expect(
            tmp.contains("disk-fill: refused EDQUOT") && (Self.filled(tmp) ?? .max) < 1 << 20,
            "\(tmp)")

        // Everyone else on the filesystem is unaffected: another app writes, appd installs,
        // records, logs and launches.
        let neighbour = try Self.run(
            daemon, "com.example.neighbour",
            ["disk-fill", "\(try Self.dataPath(daemon, "com.example.neighbour"))/Documents/some"])
        #expect(
            neighbour.contains("disk-fill: refused EDQUOT")
                && (Self.filled(neighbour) ?? 0) > 14 << 20, "\(neighbour)")
        try daemon.installProbe("com.example.late")
        let chatter = try Self.run(daemon, "com.example.late", ["chatter", "50"])
        #expect(chatter.contains("chatter line 0000049"), "\(chatter)")

        // The kernel keeps the limit: across a daemon restart, and an upgrade of the app.
        daemon.stop()
        try daemon.start()
        let again = try Self.run(
            daemon, "com.example.filler", ["disk-fill", "\(home)/Documents/after-restart"])
        #expect(
            again.contains("disk-fill: refused EDQUOT") && (Self.filled(again) ?? .max) < 1 << 20,
            "\(again)")
        // A new bundle of the same app (makeProbe writes it afresh).
        try FileManager.default.removeItem(atPath: "\(daemon.directory)/src-com.example.filler")
        try daemon.installProbe(
            "com.example.filler", info: "<key>CFBundleShortVersionString</key><string>2.0</string>")
        #expect(try Self.dataPath(daemon, "com.example.filler") == home)
        unlink("\(home)/Documents/big")
        let upgraded = try Self.run(
            daemon, "com.example.filler", ["disk-fill", "\(home)/Documents/after-upgrade"])
        #expect(upgraded.contains("disk-fill: refused EDQUOT"), "\(upgraded)")
        #expect((Self.filled(upgraded) ?? .max) <= 16 << 20, "\(upgraded)")

        // A changed DataQuota= reaches installed apps through appd doctor.
        let bigger = "\(daemon.directory)/bigger.conf"
        try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            .replacingOccurrences(of: "DataQuota=16M", with: "DataQuota=32M")
            .write(toFile: bigger, atomically: true, encoding: .utf8)
        let check = try daemon.run("appd", ["doctor", "--config", bigger])
        #expect(
            check.output.contains(
                "data container: its limit is 16777216 bytes, [Sandbox] DataQuota= says 33554432"),
            "\(check.output)")
        _ = try daemon.run("appd", ["doctor", "--repair", "--config", bigger])
        let after = try daemon.run("appd", ["profile", "--config", bigger, "com.example.filler"])
        #expect(after.output.contains("data container: 32M (project quota"), "\(after.output)")
    }
}
