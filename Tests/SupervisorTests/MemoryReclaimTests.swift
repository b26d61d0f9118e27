import AppdAPI
import AppdBase
import Foundation
import Glibc
import Testing

@testable import Supervisor

/// Memory back on freeze (docs/lifecycle.md): what the Supervisor asks of an instance's cgroup
/// once it is frozen, on fake cgroups (SandboxHostTests' CgroupReclaimTests ask the kernel).
@Suite("the Supervisor on fakes: memory back on freeze", .serialized)
struct MemoryReclaimTests {
    static let config = "[Lifecycle]\nBackgroundGracePeriod=3600\nSuspendedMemory=16M\n"

    @Test("a freeze reclaims the app's memory down to SuspendedMemory; the instance shows it")
    func reclaimed() async throws {
        let daemon = try FakeDaemon(config: Self.config)
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let app = try await supervisor.launch("com.example.app", arguments: [], caller: 1000)
        let cgroup = try #require(daemon.driver[app.id])
        cgroup.memoryBytes.withLock { $0 = 100 << 20 }
        cgroup.reclaimable.withLock { $0 = .max }
        _ = try await supervisor.suspend(app.id)
        #expect(try await soon { try await supervisor.instance(app.id).memoryReclaim != nil })
        let reclaim = try #require(try await supervisor.instance(app.id).memoryReclaim)
        #expect(reclaim.before == 100 << 20)
        #expect(reclaim.after == 16 << 20)
        #expect(reclaim.target == 16 << 20)
        #expect(reclaim.stopped == nil)
        // Thawed, the figure is gone: it described the frozen app.
        _ = try await supervisor.resume(app.id)
        #expect(try await supervisor.instance(app.id).memoryReclaim == nil)
        await daemon.finish()
    }

    @Test("a reclaim that blocks never delays the freeze, and a thaw stops it")
    func blockingReclaim() async throws {
        let daemon = try FakeDaemon(config: Self.config)
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let app = try await supervisor.launch("com.example.app", arguments: [], caller: 1000)
        let cgroup = try #require(daemon.driver[app.id])
        cgroup.memoryBytes.withLock { $0 = 100 << 20 }
        cgroup.reclaimHangs.withLock { $0 = true }
        #expect(try await supervisor.suspend(app.id).state == .suspended)
        #expect(try await soon { cgroup.reclaimRunning.withLock { $0 } })
        // The actor answers while the reclaim blocks (until it is stopped).
        #expect(try await supervisor.instance(app.id).state == .suspended)
        #expect(try await supervisor.resume(app.id).state == .active)
        #expect(try await soon { cgroup.reclaimStopped.withLock { $0 } })
        #expect(try await supervisor.instance(app.id).memoryReclaim == nil)
        await daemon.finish()
    }

    @Test("a reclaim that fails leaves the app frozen; SuspendedMemory=off asks for none")
    func failureAndOff() async throws {
        let daemon = try FakeDaemon(config: Self.config)
        daemon.catalog.add("com.example.app")
        let supervisor = daemon.supervisor
        let app = try await supervisor.launch("com.example.app", arguments: [], caller: 1000)
        let cgroup = try #require(daemon.driver[app.id])
        cgroup.reclaimFailure.withLock { $0 = AppdError(.io, "memory.reclaim: EIO") }
        #expect(try await supervisor.suspend(app.id).state == .suspended)
        #expect(try await soon { cgroup.reclaims.withLock { $0 } == 1 })
        #expect(try await supervisor.instance(app.id).state == .suspended)
        #expect(try await supervisor.instance(app.id).memoryReclaim == nil)
        await daemon.finish()

        let off = try FakeDaemon(
            config: "[Lifecycle]\nBackgroundGracePeriod=3600\nSuspendedMemory=off\n")
        off.catalog.add("com.example.app")
        let other = try await off.supervisor.launch("com.example.app", arguments: [], caller: 1000)
        _ = try await off.supervisor.suspend(other.id)
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(off.driver[other.id]?.reclaims.withLock { $0 } == 0)
        await off.finish()
    }

    @Test("jetsam ends a suspended app whose memory stayed before an older one given back")
    func jetsamPrefersUnreclaimed() async throws {
        let daemon = try FakeDaemon(
            config: Self.config
                + "MemoryBudget=100M\nMemoryPressureWarning=0\nMemoryPressureCritical=0\n")
        daemon.catalog.add("com.example.older")
        daemon.catalog.add("com.example.newer")
        let supervisor = daemon.supervisor
        let older = try await supervisor.launch("com.example.older", arguments: [], caller: 1000)
        let newer = try await supervisor.launch("com.example.newer", arguments: [], caller: 1000)
        for (id, reclaimable) in [(older.id, Int64.max), (newer.id, 0)] {
            let cgroup = try #require(daemon.driver[id])
            cgroup.memoryBytes.withLock { $0 = 100 << 20 }
            cgroup.reclaimable.withLock { $0 = reclaimable }
            _ = try await supervisor.suspend(id)
            #expect(try await soon { try await supervisor.instance(id).memoryReclaim != nil })
        }
        // 16 + 100 MiB of 100: a warning, then one kill: the newer, whose memory stayed.
        await supervisor.checkMemory(pressure: nil)
        await supervisor.checkMemory(pressure: nil)
        let ended = try await exited(supervisor, newer.id)
        #expect(ended.exit?.reason == .jetsam)
        #expect(ended.exit?.message?.contains("not reclaimed to SuspendedMemory") == true)
        #expect(try await supervisor.instance(older.id).state == .suspended)
        await daemon.finish()
    }
}
