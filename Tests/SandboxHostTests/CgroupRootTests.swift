import AppdBase
import Foundation
import Testing

@testable import Sandbox

/// A driver whose parent is a fresh `/appd-test.<pid>.<n>` in every hierarchy. Deinit kills
/// and removes every instance it created, then the parents, so a failed test leaves nothing.
final class TestCgroups {
    nonisolated(unsafe) private static var counter = 0
    let driver: any CgroupDriver
    private var instances: [any InstanceCgroup] = []
    /// The parent, and the apps its instances were made for: on a hybrid host the cpuset
    /// hierarchy's levels are made by the first `create` that asks a cpuset, and are not among
    /// the driver's `parentDirectories`.
    private let name: String
    private var apps: Set<String> = []

    init(layout: CgroupLayout = CgroupLayout.detect(), parent: String? = nil) throws {
        Self.counter += 1
        name = parent ?? "/appd-test.\(getpid()).\(Self.counter)"
        driver = try Cgroups.driver(layout: layout, settings: CgroupSettings(parent: name))
    }

    func create(
        _ instance: String, app: String = "com.example.test",
        limits: CgroupLimits? = CgroupLimits(memoryMax: 256 << 20, pidsMax: 64)
    ) throws
        -> any InstanceCgroup
    {
        apps.insert(app)
        let cgroup = try driver.create(instance: instance, app: app, limits: limits)
        instances.append(cgroup)
        return cgroup
    }

    deinit {
        for cgroup in instances {
            try? cgroup.thaw()
            try? cgroup.kill()
            // Should kill() itself be broken, SIGKILL what is left by pid: everything in a test
            // cgroup was started by this test.
            let end = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < end {
                let left = (cgroup.procsFiles + cgroup.relayProcsFiles).flatMap { file in
                    ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "")
                        .split(separator: "\n").compactMap { pid_t($0) }
                }
                if left.isEmpty { break }
                for pid in Set(left) { Glibc.kill(pid, SIGKILL) }
                usleep(1000)
            }
            try? cgroup.remove()
        }
        for parent in driver.parentDirectories { rmdir(parent) }
        for app in apps { rmdir("/sys/fs/cgroup/cpuset\(name)/\(app)") }
        rmdir("/sys/fs/cgroup/cpuset\(name)")
    }
}

@Suite("cgroups on this host (root)", .serialized, rootOnly)
struct CgroupRootTests {
    @Test("an instance cgroup holds the process the launcher places in it, in every hierarchy")
    func placement() throws {
        let cgroups = try TestCgroups()
        let cgroup = try cgroups.create("placement", limits: CgroupLimits(pidsMax: 20))
        #expect(cgroup.procsFiles.count == cgroup.directories.count)
        #expect(cgroup.directories.allSatisfy { exists($0) })
        let child = try Child(in: cgroup, exec: "sleep 1000")
        #expect(try cgroup.processes() == [child.pid])
        // /proc/PID/cgroup names the instance in each hierarchy it joined: its app leaf where a
        // suspend freezes (the v2 tree), the instance directory in the v1 hierarchies.
        let membership = try String(contentsOfFile: "/proc/\(child.pid)/cgroup", encoding: .utf8)
        let lines = membership.split(separator: "\n").filter {
            $0.hasSuffix("/placement/app") || $0.hasSuffix("/placement")
        }
        #expect(lines.count == cgroup.directories.count, "\(membership)")
        #expect(lines.filter { $0.hasSuffix("/app") }.count == 1, "\(membership)")
        if cgroups.driver.layout.mode == .unified {
            #expect(
                try String(contentsOfFile: cgroup.directories[0] + "/pids.max", encoding: .utf8)
                    == "20\n")
        } else {
            let pids = try #require(cgroup.directories.first { $0.contains("/pids/") })
            #expect(try String(contentsOfFile: pids + "/pids.max", encoding: .utf8) == "20\n")
        }
    }

    @Test("a fork loop stops at pids.max and events() counts the refused forks")
    func pidsLimit() throws {
        let cgroups = try TestCgroups()
        let cgroup = try cgroups.create("forks", limits: CgroupLimits(pidsMax: 20))
        let loop = try Child(
            in: cgroup,
            exec: """
                sh -c 'i=0; while [ $i -lt 60 ]; do sleep 1000 & i=$((i+1)); done; sleep 1000'
                """)
        try waitUntil("pids.max was hit") { try cgroup.events().pidsLimitHits > 0 }
        let inside = try cgroup.processes()
        #expect(inside.count <= 20)
        #expect(inside.count >= 15, "the loop should have filled the cgroup: \(inside)")
        try cgroup.kill()
        #expect(try cgroup.processes().isEmpty)
        loop.wait()
        #expect(isGone(loop.pid))
        // The sleeps were the loop's children: gone, or zombies waiting for init to reap them.
        for pid in inside where pid != loop.pid {
            let state = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))
                .flatMap { $0.split(separator: ")").last?.split(separator: " ").first }
            #expect(state == nil || state == "Z", "pid \(pid) survived kill(): \(state ?? "")")
        }
    }

    @Test("freeze stops every process (no CPU time passes) and thaw resumes them")
    func freezeThaw() throws {
        let cgroups = try TestCgroups()
        let cgroup = try cgroups.create("freeze")
        let spinner = try Child(in: cgroup, exec: "sh -c 'while :; do :; done'")
        let sleeper = try Child(in: cgroup, exec: "sleep 1000")
        try waitUntil("the spinner runs") { (spinner.stat()?.utime ?? 0) > 0 }

        try cgroup.freeze()
        #expect(try cgroup.isFrozen())
        let frozenAt = try #require(spinner.stat())
        usleep(300_000)
        let later = try #require(spinner.stat())
        #expect(later.utime == frozenAt.utime, "a frozen process kept running")
        #expect(later.state != "R")
        #expect(sleeper.stat()?.state != "R")
        // A frozen instance still holds its processes; signals wait for the thaw.
        #expect(Set(try cgroup.processes()) == [spinner.pid, sleeper.pid])

        try cgroup.thaw()
        #expect(try !cgroup.isFrozen())
        try waitUntil("the spinner runs again") { (spinner.stat()?.utime ?? 0) > later.utime }
    }

    @Test("kill() ends every process, even a frozen one, and remove() leaves no directory")
    func killAndRemove() throws {
        let cgroups = try TestCgroups()
        let cgroup = try cgroups.create("kill")
        let children = try (0..<3).map { _ in try Child(in: cgroup, exec: "sleep 1000") }
        #expect(Set(try cgroup.processes()) == Set(children.map(\.pid)))

        let busy = try #require(throws: AppdError.self) { try cgroup.remove() }
        #expect(busy.code == .conflict)
        #expect(busy.message.contains("still in it"))

        try cgroup.freeze()
        try cgroup.kill()
        #expect(try cgroup.processes().isEmpty)
        for child in children {
            #expect(child.terminationSignal() == SIGKILL, "pid \(child.pid): \(child.status ?? -1)")
            #expect(isGone(child.pid))
        }
        try cgroup.thaw()
        try cgroup.remove()
        for directory in cgroup.directories {
            #expect(!exists(directory), "\(directory) is still there")
            // The per-app level goes too once its last instance is gone.
            #expect(!exists((directory as NSString).deletingLastPathComponent))
        }
        try cgroup.remove()  // again: missing directories are fine
    }

    @Test("a child allocating beyond memory.max is OOM-killed and events() reports it")
    func memoryLimit() throws {
        let cgroups = try TestCgroups()
        let limit: Int64 = 32 << 20
        let cgroup = try cgroups.create("oom", limits: CgroupLimits(memoryMax: limit, pidsMax: 20))
        #expect(try cgroup.events().oomKills == 0)
        // dd fills a 256 MiB buffer: far beyond the limit, and there is no swap to hide in.
        let hog = try Child(in: cgroup, exec: "dd if=/dev/zero of=/dev/null bs=256M count=1")
        #expect(hog.terminationSignal() == SIGKILL, "dd ended with status \(hog.status ?? -1)")
        let events = try cgroup.events()
        #expect(events.oomKills >= 1)
        #expect(events.memoryLimitHits >= 1)
        let memory = try cgroup.memory()
        #expect(memory.current < limit)
        if let peak = memory.peak {
            #expect(peak <= limit)
            #expect(peak > limit / 2, "the hog never got near the limit: peak \(peak)")
        }
    }

    @Test("an instance name already in use is refused, not shared")
    func existingInstance() throws {
        let cgroups = try TestCgroups()
        _ = try cgroups.create("twice")
        let error = try #require(throws: AppdError.self) { try cgroups.create("twice") }
        #expect(error.code == .exists)
        #expect(try cgroups.driver.open(instance: "twice", app: "com.example.test") != nil)
        #expect(try cgroups.driver.open(instance: "never", app: "com.example.test") == nil)
    }

    @Test("create + remove and freeze + thaw are cheap (prints the measurement)")
    func timing() throws {
        let cgroups = try TestCgroups()
        _ = try cgroups.create("warm-up")
        let rounds = 50
        let clock = ContinuousClock()
        let createRemove = try clock.measure {
            for round in 0..<rounds {
                let cgroup = try cgroups.driver.create(
                    instance: "t\(round)", app: "com.example.timing", limits: nil)
                try cgroup.remove()
            }
        }
        let cgroup = try cgroups.create("freezer")
        let child = try Child(in: cgroup, exec: "sleep 1000")
        let freezeThaw = try clock.measure {
            for _ in 0..<rounds {
                try cgroup.freeze()
                try cgroup.thaw()
            }
        }
        let killed = try clock.measure { try cgroup.kill() }
        child.wait()
        print(
            "cgroups (\(cgroups.driver.layout.mode)): create+remove \(createRemove / rounds), "
                + "freeze+thaw \(freezeThaw / rounds), kill of 1 process \(killed)")
        #expect(createRemove / rounds < .milliseconds(50))
    }

    /// The unified driver against this host's controller-less v2 tree: everything but limits.
    /// The fake "own" cgroup holds a sleep standing in for the daemon, which prepare() must
    /// move into the daemon leaf before it enables controllers.
    @Test("unified driver on the v2 tree: daemon moves to its leaf; freeze, kill, remove work")
    func unifiedOnV2Tree() throws {
        let host = CgroupLayout.detect()
        guard host.mode == .hybrid, var unified = host.unified else { return }
        let own = "/appd-test.\(getpid()).unified"
        let ownDirectory = unified.mountPoint + own
        #expect(mkdir(ownDirectory, 0o755) == 0)
        defer {
            rmdir(ownDirectory + "/daemon")
            rmdir(ownDirectory + "/apps")
            rmdir(ownDirectory)
        }
        let daemon = try Child("echo $$ > '\(ownDirectory)/cgroup.procs' && exec sleep 1000")
        defer {
            kill(daemon.pid, SIGKILL)
            daemon.wait(seconds: 5)
        }
        try waitUntil("the stand-in daemon is in \(own)") {
            (try? String(contentsOfFile: ownDirectory + "/cgroup.procs", encoding: .utf8))
                == "\(daemon.pid)\n"
        }
        unified.ownCgroup = own
        let layout = CgroupLayout(mode: .unified, unified: unified, v1: [])
        let driver = try Cgroups.driver(layout: layout, settings: CgroupSettings(parent: "apps"))
        #expect(driver.parentDirectories == [ownDirectory + "/apps"])

        try driver.prepare()
        #expect(try String(contentsOfFile: ownDirectory + "/cgroup.procs", encoding: .utf8) == "")
        #expect(
            try String(contentsOfFile: ownDirectory + "/daemon/cgroup.procs", encoding: .utf8)
                == "\(daemon.pid)\n")
        try driver.prepare()  // idempotent

        // No controllers here: limits are refused with a hint, an unlimited instance works.
        let refused = try #require(throws: AppdError.self) {
            try driver.create(instance: "limited", app: "com.example.v2", limits: nil)
        }
        #expect(refused.hint?.contains("controller") == true, "\(refused)")
        #expect(!exists(ownDirectory + "/apps/com.example.v2"))

        let cgroup = try driver.create(
            instance: "one", app: "com.example.v2",
            limits: CgroupLimits())
        defer {
            try? cgroup.kill()
            try? cgroup.remove()
        }
        #expect(cgroup.procsFiles == [ownDirectory + "/apps/com.example.v2/one/app/cgroup.procs"])
        #expect(
            cgroup.relayProcsFiles == [ownDirectory + "/apps/com.example.v2/one/relay/cgroup.procs"]
        )
        let child = try Child(in: cgroup, exec: "sleep 1000")
        let relay = try Child(in: cgroup, relay: true, exec: "sh -c 'while :; do :; done'")
        try cgroup.freeze()
        #expect(try cgroup.isFrozen())
        try expectRunning(relay, "the relay, while the app is frozen")
        try cgroup.thaw()
        try cgroup.kill()
        #expect(child.terminationSignal() == SIGKILL)
        #expect(isGone(child.pid))
        #expect(relay.terminationSignal() == SIGKILL)
        #expect(try cgroup.events() == CgroupEvents())
        #expect(throws: AppdError.self) { try cgroup.memory() }
        try cgroup.remove()
        #expect(!exists(ownDirectory + "/apps/com.example.v2"))
    }

    /// A v1-only (legacy) host, simulated by leaving this host's v2 tree out of the layout:
    /// freezing goes through the v1 freezer and kill() through the SIGKILL loop.
    @Test("legacy v1 only: the v1 freezer freezes, and kill() without cgroup.kill still empties it")
    func legacy() throws {
        var layout = CgroupLayout.detect()
        guard layout.mode == .hybrid, layout.v1Hierarchy(for: "freezer") != nil else { return }
        layout.unified = nil
        layout.mode = .legacy
        let cgroups = try TestCgroups(layout: layout)
        let cgroup = try cgroups.create("legacy", limits: CgroupLimits(pidsMax: 512))
        #expect(cgroup.directories.contains { $0.contains("/freezer/") })
        #expect(!cgroup.directories.contains { $0.contains("/unified/") })
        // A shell that keeps forking: the kill loop has to outrun it.
        let forker = try Child(
            in: cgroup, exec: "sh -c 'while :; do sleep 1000 & sleep 0.01; done'")
        try waitUntil("the forker has children") { try cgroup.processes().count > 3 }
        let spinner = try Child(in: cgroup, exec: "sh -c 'while :; do :; done'")
        try expectFreezes(cgroup, spinner)

        try cgroup.kill()  // while frozen: the loop thaws so SIGKILL lands
        #expect(try cgroup.processes().isEmpty)
        #expect(forker.terminationSignal() == SIGKILL)
        #expect(spinner.terminationSignal() == SIGKILL)
        try cgroup.thaw()
        try cgroup.remove()
        #expect(cgroup.directories.allSatisfy { !exists($0) })
    }

    /// A suspend must not freeze the output relay (issue 24 item 6): on this hybrid host through
    /// the v2 tree's `cgroup.freeze`, and on a v1-only host through the v1 freezer.
    @Test(
        "a suspend freezes the app's leaf, never the relay's; kill() ends both",
        arguments: [false, true])
    func relayLeaf(legacy: Bool) throws {
        var layout = CgroupLayout.detect()
        if legacy {
            guard layout.mode == .hybrid, layout.v1Hierarchy(for: "freezer") != nil else { return }
            layout.unified = nil
            layout.mode = .legacy
        }
        let cgroups = try TestCgroups(layout: layout)
        let cgroup = try cgroups.create("leaves")
        // Leaves only where a suspend freezes (the v2 tree, or the v1 freezer): the other v1
        // hierarchies hold the launcher and the relay in the instance directory (issue 36).
        let frozen = try #require(
            cgroup.directories.first { $0.contains(legacy ? "/freezer/" : "/unified/") })
        #expect(cgroup.relayProcsFiles == [frozen + "/relay/cgroup.procs"])
        #expect(
            cgroup.procsFiles.filter { $0.hasSuffix("/app/cgroup.procs") }
                == [frozen + "/app/cgroup.procs"])
        for directory in cgroup.directories where directory != frozen {
            #expect(!exists(directory + "/app") && !exists(directory + "/relay"), "\(directory)")
        }
        let app = try Child(in: cgroup, exec: "sh -c 'while :; do :; done'")
        let relay = try Child(in: cgroup, relay: true, exec: "sh -c 'while :; do :; done'")
        #expect(Set(try cgroup.processes()) == [app.pid, relay.pid])
        try waitUntil("the app runs") { (app.stat()?.utime ?? 0) > 0 }

        try cgroup.freeze()
        #expect(try cgroup.isFrozen())
        let frozenAt = try #require(app.stat())
        try expectRunning(relay, "the relay, while the app is frozen")
        #expect(app.stat()?.utime == frozenAt.utime, "the frozen app kept running")

        try cgroup.kill()  // while the app is frozen
        #expect(try cgroup.processes().isEmpty)
        for child in [app, relay] { #expect(child.terminationSignal() == SIGKILL) }
        try cgroup.thaw()
        try cgroup.remove()
        #expect(cgroup.directories.allSatisfy { !exists($0) })
    }

    @Test(
        "an instance an appd made with leaves in every hierarchy is adopted: its leaves are found, its relay stays running while it is frozen"
    )
    func adoptedWithLeavesEverywhere() throws {
        let cgroups = try TestCgroups()
        let made = try cgroups.create("older")
        for directory in made.directories where !exists(directory + "/app") {
            for leaf in [Cgroups.appLeaf, Cgroups.relayLeaf] {
                #expect(mkdir(directory + "/" + leaf, 0o755) == 0)
            }
        }
        let cgroup = try #require(
            try cgroups.driver.open(instance: "older", app: "com.example.test"))
        #expect(cgroup.procsFiles == made.directories.map { $0 + "/app/cgroup.procs" })
        #expect(cgroup.relayProcsFiles == made.directories.map { $0 + "/relay/cgroup.procs" })
        let app = try Child(in: cgroup, exec: "sh -c 'while :; do :; done'")
        let relay = try Child(in: cgroup, relay: true, exec: "sh -c 'while :; do :; done'")
        try expectFreezes(cgroup, app)
        try expectRunning(relay, "the relay, while the app is frozen")
        try cgroup.kill()
        for child in [app, relay] { #expect(child.terminationSignal() == SIGKILL) }
        try cgroup.thaw()
        try cgroup.remove()
        #expect(cgroup.directories.allSatisfy { !exists($0) })
    }

    @Test(
        "an instance an older appd made (no leaves) is adopted: open() finds it, freezes and kills it whole"
    )
    func adoptedWithoutLeaves() throws {
        let cgroups = try TestCgroups()
        let made = try cgroups.create("old")
        for directory in made.directories where exists(directory + "/app") {
            for leaf in [Cgroups.appLeaf, Cgroups.relayLeaf] {
                #expect(rmdir(directory + "/" + leaf) == 0)
            }
        }
        let cgroup = try #require(try cgroups.driver.open(instance: "old", app: "com.example.test"))
        #expect(cgroup.procsFiles == made.directories.map { $0 + "/cgroup.procs" })
        #expect(cgroup.relayProcsFiles.isEmpty)
        let spinner = try Child(in: cgroup, exec: "sh -c 'while :; do :; done'")
        try expectFreezes(cgroup, spinner)
        try cgroup.kill()
        #expect(spinner.terminationSignal() == SIGKILL)
        try cgroup.thaw()
        try cgroup.remove()
        #expect(cgroup.directories.allSatisfy { !exists($0) })
    }
}

/// Once `spinner` (a spinning shell in `cgroup`) runs, a freeze stops it: no CPU time passes.
func expectFreezes(_ cgroup: any InstanceCgroup, _ spinner: Child) throws {
    try waitUntil("the spinner runs") { (spinner.stat()?.utime ?? 0) > 0 }
    try cgroup.freeze()
    #expect(try cgroup.isFrozen())
    let frozenAt = try #require(spinner.stat())
    usleep(200_000)
    #expect(spinner.stat()?.utime == frozenAt.utime, "a frozen process kept running")
}

/// `child` gets CPU time within a few seconds (a spinning shell that is not frozen).
func expectRunning(_ child: Child, _ what: String) throws {
    let before = child.stat()?.utime ?? 0
    try waitUntil(what + " runs") { (child.stat()?.utime ?? 0) > before }
}
