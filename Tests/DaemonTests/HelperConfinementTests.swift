import Foundation
import Glibc
import TestSupport
import Testing

/// An instance's processes other than the app (the launcher, the output relay, the sandbox's
/// PID 1) keep no privilege of the host once the app runs (docs/launcher-protocol.md, "The
/// helpers"; issue 35 item 9).
@Suite("the launcher's helpers under the daemon", .serialized, rootOnly)
struct HelperConfinementTests {
    @Test(
        "a running instance's launcher, output relay and PID 1 hold no capability, each under a seccomp filter of its own"
    )
    func helpersHoldNothing() throws {
        let daemon = try TestDaemon()
        let id = "com.example.helpers"
        try daemon.installProbe(id)
        let instance = try daemon.launch(id, ["sleep", "30"])
        defer { _ = try? daemon.killAndWait(instance.id) }
        let launcher = try #require(instance.pid)
        var helpers: [HelperStatus] = []
        var pid1: pid_t?
        let settled = daemon.eventually {
            let children = HelperStatus.children(of: launcher)
            // PID 1 is the child in the sandbox's pid namespace too (two NSpid entries); it
            // has confined itself once its own child, the app, runs.
            pid1 = children.first { (HelperStatus($0).fields["NSpid"] ?? "").contains("\t") }
            guard children.count == 2, let pid1, !HelperStatus.children(of: pid1).isEmpty
            else { return false }
            helpers = ([launcher] + children).map { HelperStatus($0) }
            return helpers.allSatisfy(\.holdsNothing)
        }
        #expect(settled, "\(helpers)")
        #expect(helpers.count == 3, "\(helpers)")
        for helper in helpers {
            #expect(helper.holdsNothing, "\(helper)")
        }
        // PID 1 signals the app as the app's effective uid; its real and saved uid stay 0, so
        // the app may not ptrace, prlimit or signal it.
        let app = try #require(pid1.flatMap { HelperStatus.children(of: $0).first })
        let appUID = try #require(HelperStatus(app).uids.first)
        let init1 = try #require(helpers.first { $0.pid == pid1 })
        #expect(init1.uids.prefix(3) == ["0", appUID, "0"], "\(init1)")
        #expect(appUID != "0")
    }
}

/// Issue 36: a launch moves no process between cgroups. A pid written to `cgroup.procs` takes
/// the kernel's lock over every thread group, which waits for an RCU grace period (10-20 ms
/// after an idle moment): the launcher is born in its v2 directory, the output relay in its
/// leaf, and each joins a v1 hierarchy by writing 0 to `tasks` itself.
@Suite("the launch path moves no process between cgroups", .serialized, rootOnly)
struct CgroupBirthTests {
    @Test("strace of the daemon and its children over a launch: no cgroup.procs opened for writing")
    func noMigration() throws {
        guard access("/usr/bin/strace", X_OK) == 0 else {
            Issue.record("strace is missing (apt-get install strace)")
            return
        }
        let daemon = try TestDaemon()
        let id = "com.example.born"
        try daemon.installProbe(id)
        // A first launch outside the trace: the app's namespace template and the caches.
        _ = try daemon.wait(daemon.launch(id, ["exit", "0"]).id)
        let pid = try #require(daemon.process?.processIdentifier)
        let trace = "\(daemon.directory)/launch.strace"
        // Through python3, which unblocks every signal first: the test process's blocked set is
        // inherited, and strace, finding SIGINT blocked, would never stop tracing.
        let unblocked =
            "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); "
            + "os.execv(sys.argv[1], sys.argv[1:])"
        let strace = try ChildProcess(
            "/usr/bin/python3",
            [
                "-c", unblocked, "/usr/bin/strace", "-f", "-qq", "-e", "trace=openat,open",
                "-o", trace, "-p", "\(pid)",
            ], stdout: .discard, stderr: .discard)
        defer {
            kill(strace.processIdentifier, SIGINT)
            strace.waitUntilExit()
        }
        // strace writes the trace file once it is attached; give it that moment.
        #expect(eventually { access(trace, F_OK) == 0 })
        usleep(200_000)
        let instance = try daemon.launch(id, ["output-on-cue"])
        let home = try daemon.dataContainer(id)
        #expect(FileManager.default.createFile(atPath: "\(home)/cue", contents: nil))
        #expect(
            try daemon.eventually { access("\(home)/said", F_OK) == 0 },
            "the app never ran its output")
        _ = try daemon.killAndWait(instance.id)
        kill(strace.processIdentifier, SIGINT)
        strace.waitUntilExit()
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        // The trace saw the launch: the launcher's own opens (its v1 `tasks`, /dev/null).
        #expect(lines.contains { $0.contains("/dev/null") }, "the trace missed the launch")
        let moves = lines.filter {
            $0.contains("cgroup.procs") && ($0.contains("O_WRONLY") || $0.contains("O_RDWR"))
        }
        #expect(moves.isEmpty, "cgroup.procs opened for writing:\n\(moves.joined(separator: "\n"))")
    }
}
