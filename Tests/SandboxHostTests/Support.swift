import AppdBase
import Foundation
@_exported import TestSupport
import Testing

@testable import Sandbox

/// A scratch directory removed when the value goes away, even if the test failed.
final class Scratch {
    let path: String

    init(_ label: String = "sandbox-host-test") {
        var template = Array("\(NSTemporaryDirectory())/\(label).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(
            decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `content` at `relative`, creating directories.
    func write(_ relative: String, _ content: String) {
        let file = "\(path)/\(relative)"
        try? FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: file, contents: Data(content.utf8))
    }

    func makeDirectory(_ relative: String) {
        try? FileManager.default.createDirectory(
            atPath: "\(path)/\(relative)", withIntermediateDirectories: true)
    }

    func remove(_ relative: String) {
        try? FileManager.default.removeItem(atPath: "\(path)/\(relative)")
    }
}

/// This machine's cgroup mounts (hybrid v1 and v2), as mountinfo shows them.
let hybridMountinfo = """
    22 27 0:21 / /proc rw,relatime - proc proc rw
    31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
    32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
    33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
    34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
    35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
    36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
    37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
    38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
    39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
    40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
    41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
    """

let hybridProcSelfCgroup = """
    9:name=systemd:/
    8:pids:/
    7:blkio:/
    6:freezer:/
    5:devices:/
    4:memory:/process_api/4b8aed88462c7e434cc44161a20f870c
    3:cpuset:/
    2:cpuacct:/
    1:cpu:/
    0::/
    """

/// A Debian 12 / Fedora style systemd host: cgroup2 only, appd in its delegated service cgroup.
let unifiedMountinfo = """
    25 21 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
    """

/// A fake /proc and /sys describing a kernel; every file can be changed before `detect`.
final class FakeHost {
    let scratch = Scratch("fake-host")
    var root: String { scratch.path }

    /// Full features by default: unified cgroup v2 with appd.service delegated.
    init() {
        scratch.write("proc/sys/kernel/osrelease", "6.18.0\n")
        scratch.write(
            "proc/sys/kernel/seccomp/actions_avail",
            "kill_process kill_thread trap errno user_notif trace log allow\n")
        scratch.write("proc/sys/user/max_user_namespaces", "96364\n")
        for kind in ["cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts"] {
            scratch.write("proc/self/ns/\(kind)", "")
        }
        scratch.write("proc/self/mountinfo", unifiedMountinfo + "\n")
        scratch.write("proc/self/cgroup", "0::/system.slice/appd.service\n")
        scratch.write(
            "sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory hugetlb pids rdma misc\n")
        let own = "sys/fs/cgroup/system.slice/appd.service"
        scratch.write("\(own)/cgroup.controllers", "cpu memory pids\n")
        scratch.write("\(own)/cgroup.freeze", "0\n")
        scratch.write("\(own)/cgroup.kill", "")
    }

    func write(_ relative: String, _ content: String) { scratch.write(relative, content) }
    func remove(_ relative: String) { scratch.remove(relative) }

    /// Turns the fake into this machine's hybrid layout.
    func makeHybrid() {
        write("proc/self/mountinfo", hybridMountinfo + "\n")
        write("proc/self/cgroup", hybridProcSelfCgroup + "\n")
        remove("sys/fs/cgroup")
        write("sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n")
        write("sys/fs/cgroup/unified/some-child/cgroup.freeze", "0\n")
        write("sys/fs/cgroup/unified/some-child/cgroup.kill", "")
    }

    func detect(_ probes: HostFeatures.SyscallProbes = .full) -> HostFeatures {
        HostFeatures.detect(root: root, probes: probes)
    }
}

extension HostFeatures.SyscallProbes {
    static let full = Self(landlockCreateRulesetVersion: 7, prctlGetSeccomp: 0, pidfdOpen: 0)

    func with(landlock: Int32? = nil, seccomp: Int32? = nil, pidfd: Int32? = nil) -> Self {
        Self(
            landlockCreateRulesetVersion: landlock ?? landlockCreateRulesetVersion,
            prctlGetSeccomp: seccomp ?? prctlGetSeccomp, pidfdOpen: pidfd ?? pidfdOpen)
    }
}

/// A child process this test started. Deinit SIGKILLs and reaps it if the test did not, so
/// a failing test leaves nothing running; it never signals any other pid.
final class Child {
    let pid: pid_t
    private(set) var status: Int32?

    /// Runs `/bin/sh -c SCRIPT` with no environment beyond PATH and no fds beyond 0-2 (a sleep
    /// that outlives its test must not hold another test's pipes).
    init(_ script: String) throws {
        pid = try spawnPlaced(
            "/bin/sh", arguments: ["/bin/sh", "-c", script], environment: ["PATH=/usr/bin:/bin"])
    }

    /// Starts `command` inside the cgroup: the shell writes its own pid into every procs file
    /// (what appd-exec does with `cgroup PATH` records), then execs the command in place.
    /// Returns once the shell has joined every hierarchy, which it says by creating a marker
    /// file after the last write. Reading the procs files for the pid instead raced with
    /// commands that end at once (a fork loop that stops at pids.max, an OOM-killed dd): under
    /// load the process could be gone before the first look (a CI run failed in this suite; loaded, 8 of 25 runs failed on it).
    /// `relay`: the relay's leaf (where appd-exec moves its output relay) instead of the app's.
    convenience init(in cgroup: any InstanceCgroup, relay: Bool = false, exec command: String)
        throws
    {
        // The relay is the launcher's child: in its directories, then born in its own leaf.
        let files = relay ? cgroup.procsFiles + cgroup.relayProcsFiles : cgroup.procsFiles
        let joins = files.map { "echo $$ > '\($0)'" }.joined(separator: " && ")
        let marker = "\(NSTemporaryDirectory())/appd-test-joined.\(UUID().uuidString)"
        defer { unlink(marker) }
        try self.init("\(joins) && : > '\(marker)' && exec \(command)")
        try waitUntil("pid \(pid) joined \(cgroup)") {
            if access(marker, F_OK) == 0 { return true }
            // A shell that failed to join exits without the marker: say so now, not at the
            // timeout.
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return false }
            status = raw
            // It may have joined, run and ended since the first look.
            if access(marker, F_OK) == 0 { return true }
            throw AppdError(.io, "pid \(pid) ended (wait status \(raw)) before it joined \(cgroup)")
        }
    }

    /// Waits up to `seconds` for the exit and returns the wait status; nil if it had not
    /// exited by then (it is SIGKILLed and reaped, so a broken kill() fails a test instead of
    /// hanging the run). A process in a v1 freezer stuck in FREEZING cannot die until it is
    /// thawed: the reaping wait is bounded too (10 s), and the test's cgroup cleanup thaws and
    /// kills what is left — a blocking waitpid here once hung a CI run for ten minutes.
    @discardableResult
    func wait(seconds: Double = 10) -> Int32? {
        if let status { return status }
        var raw: Int32 = 0
        func reaped(within seconds: Double) -> Bool {
            let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
            while ContinuousClock.now < end {
                let result = waitpid(pid, &raw, WNOHANG)
                if result == pid { return true }
                if result < 0 && errno != EINTR { return false }
                usleep(1000)
            }
            return false
        }
        if reaped(within: seconds) {
            status = raw
            return raw
        }
        Glibc.kill(pid, SIGKILL)
        if reaped(within: 10) { status = raw }
        return nil
    }

    /// The signal that ended it (waiting as `wait` does), nil if it exited or did not end.
    func terminationSignal(seconds: Double = 10) -> Int32? {
        guard let status = wait(seconds: seconds) else { return nil }
        let signal = status & 0x7f
        return signal != 0 && signal != 0x7f ? signal : nil
    }

    /// The state letter and utime (clock ticks) from /proc/PID/stat.
    func stat() -> (state: Character, utime: Int)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let state = fields[0].first, let utime = Int(fields[11]) else {
            return nil
        }
        return (state, utime)
    }

    deinit {
        if status == nil {
            Glibc.kill(pid, SIGKILL)
            wait(seconds: 5)
        }
    }
}

struct Timeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting until \(what)" }
}

/// Polls `condition` every millisecond for up to `seconds`.
func waitUntil(_ what: String, seconds: Double = 5, _ condition: () throws -> Bool) throws {
    let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < end {
        if try condition() { return }
        usleep(1000)
    }
    throw Timeout(what: what)
}

/// Whether `pid` is gone (ESRCH) — a zombie still answers kill(pid, 0).
func isGone(_ pid: pid_t) -> Bool { kill(pid, 0) != 0 && errno == ESRCH }

func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }
