import AppdAPI
import AppdClient
import Foundation
import Testing

/// `systemctl reload appd` (SIGHUP) and `appd reload`: appd.conf read again by a running daemon.
@Suite("appd reload: appd.conf again, running apps untouched", .serialized, rootOnly)
struct ReloadTests {
    @Test(
        "SIGHUP: a new [Signer] is in force for the next install; RELOADING=1 then READY=1; the running app keeps its pid"
    )
    func signerBySignal() throws {
        let vendor = try VendorKeys()
        let listener = try NotifyListener()
        let daemon = try TestDaemon(environment: ["NOTIFY_SOCKET": listener.path])
        #expect(listener.next { $0.contains("READY=1") } != nil)
        try daemon.installProbe("com.example.running")
        let running = try daemon.launch("com.example.running", ["sleep", "120"])
        let pid = try #require(running.pid)
        #expect(daemon.eventually { (try? daemon.instance(running.id).state) != .launching })
        let stateBefore = try daemon.instance(running.id).state

        let bundle = try daemon.makeProbe("org.vendor.app")
        try TestDaemon.tool(["sign", "--key", "\(vendor.folder)/vendor.signing-key", bundle])
        let before = try daemon.run("appd", ["install", bundle])
        #expect(
            before.code == 1 && before.output.contains("which this host does not trust"),
            "\(before.output)")

        let handle = try #require(FileHandle(forWritingAtPath: daemon.configPath))
        handle.seekToEndOfFile()
        handle.write(Data(vendor.signer.utf8))
        try handle.close()
        kill(try #require(daemon.process?.processIdentifier), SIGHUP)
        let reloading = try #require(listener.next { $0.contains("RELOADING=1") })
        #expect(
            reloading.split(separator: "\n").contains {
                $0.hasPrefix("MONOTONIC_USEC=") && UInt64($0.dropFirst(15)) != nil
            })
        let ready = try #require(listener.next { $0.contains("READY=1") })
        #expect(
            ready.contains("STATUS=serving on \(daemon.socket); 1 running instance(s)"), "\(ready)")

        let after = try daemon.run("appd", ["install", bundle])
        #expect(after.code == 0, "\(after.output)")
        #expect(daemon.process?.isRunning == true)
        #expect(daemon.serveLog.contains("changed [Signer vendor]"), "\(daemon.serveLog)")
        let still = try daemon.instance(running.id)
        #expect(
            still.pid == pid && still.state == stateBefore && still.state != .exited, "\(still)")
        #expect(kill(pid, 0) == 0)
    }

    @Test(
        "a broken file is refused whole, naming the line; the settings in force stay, under SIGHUP and appd reload"
    )
    func brokenFileRefused() throws {
        let vendor = try VendorKeys()
        let listener = try NotifyListener()
        let daemon = try TestDaemon(
            config: vendor.signer, environment: ["NOTIFY_SOCKET": listener.path])
        #expect(listener.next { $0.contains("READY=1") } != nil)
        try daemon.installProbe("com.example.running")
        let running = try daemon.launch("com.example.running", ["sleep", "120"])

        // Drops [Signer vendor] and has an error further down: nothing of it may apply.
        let good = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        let broken =
            good.replacingOccurrences(of: vendor.signer, with: "\n") + "[Sandbox]\nMemoryMax=lots\n"
        try broken.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let line = broken.split(separator: "\n", omittingEmptySubsequences: false).firstIndex(
            of: "MemoryMax=lots"
        ).map { $0 + 1 }
        let place = "\(daemon.configPath):\(try #require(line))"

        let reload = try daemon.run("appd", ["reload"])
        #expect(reload.code == 1)
        #expect(
            reload.output.contains(place) && reload.output.contains("MemoryMax=lots"),
            "\(reload.output)")
        kill(try #require(daemon.process?.processIdentifier), SIGHUP)
        let refused = try #require(listener.next { $0.contains("STATUS=reload refused") })
        #expect(refused.contains("READY=1") && refused.contains(place), "\(refused)")
        #expect(
            daemon.serveLog.contains("reload refused, the previous settings stay: \(place)"),
            "\(daemon.serveLog)")
        #expect(daemon.process?.isRunning == true)

        // [Signer vendor] is still in force.
        let bundle = try daemon.makeProbe("org.vendor.app")
        try TestDaemon.tool(["sign", "--key", "\(vendor.folder)/vendor.signing-key", bundle])
        let install = try daemon.run("appd", ["install", bundle])
        #expect(install.code == 0, "\(install.output)")
        #expect(try daemon.instance(running.id).pid == running.pid)
        #expect(try daemon.instance(running.id).state != .exited)

        // Fixed again: `appd reload` says what changed, and what only a restart changes.
        let fixed =
            good.replacingOccurrences(of: vendor.signer, with: "\n")
            + "\n[API]\nSocketMode=0600\n[Supervisor]\nTerminateGracePeriod=1\n"
        try fixed.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let json = try daemon.run("appd", ["reload", "--json"])
        let result = try JSONDecoder().decode(APIReloadResult.self, from: Data(json.output.utf8))
        #expect(result.config == daemon.configPath)
        #expect(result.changed == ["[Supervisor]", "[Signer vendor] (removed)"], "\(result)")
        #expect(result.restartRequired == ["[API] SocketMode"])
        let refusedNow = try daemon.run("appd", ["install", bundle])
        #expect(
            refusedNow.code == 1 && refusedNow.output.contains("which this host does not trust"),
            "\(refusedNow.output)")
    }

    @Test("[API] access lists change with a reload; reloading itself needs the admin right")
    func accessLists() throws {
        let daemon = try TestDaemon(config: "[API]\nSocketMode=0666\n")
        try daemon.installProbe("com.example.shared")
        let asNobody = { (tool: String, arguments: [String]) in
            try daemon.run(
                "/usr/bin/setpriv",
                [
                    "--reuid=65534", "--regid=65534", "--clear-groups", builtExecutable(tool),
                    "--socket", daemon.socket,
                ] + arguments)
        }
        let reload = try asNobody("appd", ["reload"])
        #expect(
            reload.code == 1
                && reload.output.contains("uid 65534 may not install or uninstall apps"),
            "\(reload.output)")
        let before = try asNobody(
            "appctl", ["launch", "--wait", "com.example.shared", "--", "exit", "5"])
        #expect(
            before.code == 1 && before.output.contains("may not launch or control apps"),
            "\(before.output)")

        let handle = try #require(FileHandle(forWritingAtPath: daemon.configPath))
        handle.seekToEndOfFile()
        handle.write(Data("\n[API]\nControlAllowed=nobody\n".utf8))
        try handle.close()
        let reloaded = try daemon.run("appd", ["reload"])
        #expect(
            reloaded.code == 0 && reloaded.output.contains("changed [API]"), "\(reloaded.output)")
        let after = try asNobody(
            "appctl", ["launch", "--wait", "com.example.shared", "--", "exit", "5"])
        #expect(after.code == 5, "\(after.output)")
    }

    @Test(
        "[Sandbox] limits: the next launch gets the reloaded MemoryMax, the running instance keeps its own"
    )
    func limits() throws {
        let daemon = try TestDaemon(config: "[Sandbox]\nMemoryMax=256M\n")
        try daemon.installProbe("com.example.limited")
        let first = try daemon.launch("com.example.limited", ["sleep", "120"])
        let firstPid = try #require(first.pid)
        // The launcher joins its cgroup as its first step, just after the launch answered.
        #expect(daemon.eventually { Self.memoryLimit(of: firstPid) == 256 << 20 })

        let text = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        try text.replacingOccurrences(of: "MemoryMax=256M", with: "MemoryMax=64M")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let reloaded = try daemon.run("appd", ["reload"])
        #expect(
            reloaded.code == 0 && reloaded.output.contains("changed [Sandbox]"),
            "\(reloaded.output)")
        let second = try daemon.launch("com.example.limited", ["sleep", "120"])
        let secondPid = try #require(second.pid)
        #expect(daemon.eventually { Self.memoryLimit(of: secondPid) == 64 << 20 })
        #expect(Self.memoryLimit(of: firstPid) == 256 << 20)
    }

    /// The memory limit of the cgroup `pid` is in: memory.max on cgroup v2, the v1 memory
    /// controller's memory.limit_in_bytes on a hybrid host.
    static func memoryLimit(of pid: pid_t) -> Int64? {
        let lines = instanceCgroupLines(of: pid)
        for line in lines {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, parts[1].split(separator: ",").contains("memory") else {
                continue
            }
            let value = try? String(
                contentsOfFile: "/sys/fs/cgroup/memory\(parts[2])/memory.limit_in_bytes",
                encoding: .utf8)
            return value.flatMap { Int64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        for line in lines where line.hasPrefix("0::") {
            let value = try? String(
                contentsOfFile: "/sys/fs/cgroup\(line.dropFirst(3))/memory.max", encoding: .utf8)
            return value.flatMap { Int64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        return nil
    }
}

/// A second signer's key pair in a folder of its own (a config names it before its daemon
/// starts), removed on deinit.
final class VendorKeys {
    let folder: String

    init() throws {
        var template = Array("/var/tmp/appd-vendor-keys.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw POSIXError(.EIO)
        }
        folder = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        try TestDaemon.tool(["keygen", "--out", folder, "--name", "vendor"])
    }

    var signer: String {
        "\n[Signer vendor]\nKey=\(folder)/vendor.public-key\nBundleIDs=org.vendor.*\nEntitlements=*\n"
    }

    deinit { try? FileManager.default.removeItem(atPath: folder) }
}
