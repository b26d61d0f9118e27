import AppdBase
import Foundation
import Testing

@testable import Sandbox

/// Memory back on freeze, asked of this host's kernel: cgroup v2's `memory.reclaim` on a
/// unified host (the VM guests), the v1 limit lowered step by step on a hybrid one (this
/// machine). Without swap only file pages can go: the app here fills 64 MiB of page cache.
@Suite("memory reclaimed from a frozen instance on this host (root)", .serialized, rootOnly)
struct CgroupReclaimTests {
    @Test("a frozen instance's page cache is reclaimed down to the target; its limit stays")
    func reclaimPageCache() throws {
        let cgroups = try TestCgroups()
        let limit: Int64 = 256 << 20
        let cgroup = try cgroups.create(
            "reclaim", limits: CgroupLimits(memoryMax: limit, pidsMax: 20))
        let file = "/var/tmp/appd-reclaim-test.\(getpid())"
        defer { unlink(file) }
        let marker = file + ".written"
        defer { unlink(marker) }
        let app = try Child(
            in: cgroup,
            exec: "sh -c 'dd if=/dev/zero of=\(file) bs=1M count=64 conv=fsync 2>/dev/null "
                + "&& cat \(file) >/dev/null && : > \(marker) && exec sleep 600'")
        try waitUntil("the app wrote its file", seconds: 30) { access(marker, F_OK) == 0 }
        let before = try cgroup.memory().current
        #expect(before > 48 << 20, "the page cache was not charged to the instance: \(before)")
        try cgroup.freeze()
        let target: Int64 = 16 << 20
        let reclaim = try #require(
            try cgroup.reclaimMemory(to: target, timeoutSeconds: 10, stop: { false }))
        #expect(reclaim.method == (cgroups.driver.layout.mode == .unified ? .reclaim : .limitSteps))
        #expect(reclaim.before >= before - (4 << 20))
        #expect(reclaim.after <= target, "stopped at \(reclaim.after): \(reclaim.stopped ?? "")")
        #expect(reclaim.stopped == nil)
        #expect(try cgroup.memory().current <= target)
        // The app keeps the limit it had (v1: put back after every step).
        let limitFile =
            cgroups.driver.layout.mode == .unified
            ? cgroup.directories[0] + "/memory.max"
            : try #require(cgroup.directories.first { $0.contains("/memory/") })
                + "/memory.limit_in_bytes"
        let now = try String(contentsOfFile: limitFile, encoding: .utf8)
        #expect(now.trimmingCharacters(in: .whitespacesAndNewlines) == String(limit))
        try cgroup.thaw()
        withExtendedLifetime(app) {}
    }

    @Test("a reclaim asked to stop gives nothing back; one below what it can reach says why")
    func stopAndFloor() throws {
        let cgroups = try TestCgroups()
        let cgroup = try cgroups.create("floor")
        // 24 MiB of anonymous memory, which without swap cannot go anywhere.
        let marker = "/var/tmp/appd-reclaim-floor.\(getpid())"
        defer { unlink(marker) }
        let app = try Child(
            in: cgroup,
            exec: "/usr/bin/python3 -c 'import time; b = bytearray(24 << 20); "
                + "b[::4096] = b\"x\" * (6144); open(\"\(marker)\", \"w\").close(); "
                + "time.sleep(600)'")
        try waitUntil("the app allocated") { access(marker, F_OK) == 0 }
        try cgroup.freeze()
        let stopped = try #require(
            try cgroup.reclaimMemory(to: 0, timeoutSeconds: 10, stop: { true }))
        #expect(stopped.stopped == "thawed")
        #expect(stopped.after == stopped.before)
        let swap =
            (try? String(contentsOfFile: "/proc/swaps", encoding: .utf8))?
            .split(separator: "\n").count ?? 1
        if swap <= 1 {
            let floor = try #require(
                try cgroup.reclaimMemory(to: 4 << 20, timeoutSeconds: 10, stop: { false }))
            #expect(floor.after > 20 << 20, "anonymous memory went without swap: \(floor.after)")
            #expect(floor.stopped == "the kernel found no more to reclaim")
            #expect(floor.seconds < 5)
        }
        try cgroup.thaw()
        withExtendedLifetime(app) {}
        #expect(try cgroup.memory().current > 20 << 20)
    }
}
