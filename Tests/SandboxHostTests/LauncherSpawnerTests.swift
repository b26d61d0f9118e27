import CLinux
import Foundation
import Glibc
import Testing

@testable import Sandbox

/// The daemon's spawner thread (LauncherSpawner): a child gets exactly the fds its plan places,
/// whatever the process opened after the thread started, and fails as posix_spawn would.
@Suite("the spawner thread: a child gets only what its plan places")
struct LauncherSpawnerTests {
    /// Runs `/bin/sh -c SCRIPT` through the spawner with `place` (fd, target) pairs, its output
    /// on a pipe placed at 1; returns what it printed and its exit status.
    static func run(
        _ spawner: LauncherSpawner, _ script: String, placing extra: [(Int32, Int32)] = []
    ) throws -> (output: String, status: Int32) {
        var pipe: [Int32] = [-1, -1]
        #expect(appd_pipe_cloexec(&pipe) == 0)
        var plan = SpawnPlan(
            path: "/bin/sh", arguments: ["/bin/sh", "-c", script], newSession: true)
        plan.stdinFromDevNull = true
        plan.place(pipe[1], at: 1)
        plan.place(pipe[1], at: 2)
        for (fd, target) in extra { plan.place(fd, at: target) }
        plan.closeFrom = (extra.map(\.1).max() ?? 2) + 1
        let pid: pid_t
        do {
            pid = try spawner.spawn(plan)
        } catch {
            close(pipe[0])
            close(pipe[1])
            throw error
        }
        close(pipe[1])
        let output = SandboxLaunch.readAll(pipe[0])
        close(pipe[0])
        return (output, SandboxLaunch.wait(pid))
    }

    @Test(
        "a child sees 0-2 and the placed fds only, though the process opened 300 more after the thread started"
    )
    func onlyPlaced() throws {
        let spawner = try #require(LauncherSpawner.start())
        // What the daemon's instances hold: pidfds, channels. Opened after the spawner started.
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<300 { held.append(open("/dev/null", O_RDONLY)) }  // not close-on-exec
        let marker = open("/etc/hostname", O_RDONLY | O_CLOEXEC)
        defer { close(marker) }
        let result = try Self.run(
            spawner, "ls /proc/$$/fd; echo --; readlink /proc/$$/fd/5",
            placing: [(marker, 5), (held[0], 3)])
        #expect(result.status == 0, "\(result.output)")
        // The shell's fds (no pipeline: it holds nothing of its own while ls runs).
        let lines = result.output.split(separator: "\n").map(String.init)
        let fds = Array(lines.prefix { $0 != "--" }).sorted()
        #expect(fds == ["0", "1", "2", "3", "5"], "\(result.output)")
        #expect(result.output.contains("/etc/hostname"), "\(result.output)")
        // What a child copies is its spawning thread's table: the spawner threads' hold 0-2 and
        // their socket, this thread's everything the process opened.
        #expect(Self.tableSize("/proc/thread-self/fd") > 300)
        let spawners = Self.threads(named: "appd-spawner")
        #expect(!spawners.isEmpty)
        for tid in spawners {
            let size = Self.tableSize("/proc/self/task/\(tid)/fd")
            #expect(size <= 4, "spawner thread \(tid) holds \(size) fds")
        }
    }

    static func tableSize(_ directory: String) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).count
    }

    static func threads(named name: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).filter {
            (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)) == name
                + "\n"
        }
    }

    @Test(
        "many spawns in a row and side by side, each child with its own fds; a failed exec is an error"
    )
    func sideBySide() async throws {
        let spawner = try #require(LauncherSpawner.start())
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<32 {
                group.addTask {
                    let result = try Self.run(spawner, "echo \(index)")
                    #expect(
                        result.output == "\(index)\n" && result.status == 0,
                        "\(index): \(result.output)")
                }
            }
            try await group.waitForAll()
        }
        var plan = SpawnPlan(
            path: "/nonexistent/appd-exec", arguments: ["appd-exec"], newSession: false)
        plan.stdinFromDevNull = true
        #expect(throws: (any Error).self) { try spawner.spawn(plan) }
        // Still serving after the failure.
        #expect(try Self.run(spawner, "echo after").output == "after\n")
    }
}
