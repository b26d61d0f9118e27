import AppdAPI
import AppdClient
import Foundation
import Testing

@Suite("jetsam", .serialized, rootOnly)
struct JetsamTests {
    @Test(
        "over the memory budget: every app is warned, then suspended apps die least recently used first, background ones survive when that is enough, and the active one survives"
    )
    func order() throws {
        let daemon = try TestDaemon(
            config: lifecycleConfig(
                "MemoryBudget=200M\nMemoryCheckInterval=0.3\nAllowedBackgroundModes=audio\nBackgroundGracePeriod=0.3\n"
            ))
        try daemon.installProbe("com.example.jetsam")
        try daemon.installProbe(
            "com.example.player",
            info: "<key>UIBackgroundModes</key><array><string>audio</string></array>")
        // 50 + 50 suspended, 50 in the background (audio keeps it running), then 100 active: 250 MiB.
        let oldest = try daemon.launch(
            "com.example.jetsam", ["lifecycle", "alloc", "50"], background: true)
        #expect(try daemon.eventually { try daemon.state(oldest.id) == .suspended })
        let newer = try daemon.launch(
            "com.example.jetsam", ["lifecycle", "alloc", "50"], background: true)
        #expect(try daemon.eventually { try daemon.state(newer.id) == .suspended })
        let player = try daemon.launch(
            "com.example.player", ["lifecycle", "alloc", "50"], background: true)
        #expect(try daemon.eventually { try daemon.instance(player.id).channel == .ready })
        usleep(700_000)
        #expect(try daemon.state(player.id) == .background)
        #expect(try daemon.instance(oldest.id).exit == nil, "jetsam acted under the budget")

        // It allocates once ready: the warning that its memory triggers must find it listening.
        let active = try daemon.launch(
            "com.example.jetsam", ["lifecycle", "alloc-after-ready", "100"])
        let first = try daemon.wait(oldest.id)
        let second = try daemon.wait(newer.id)
        #expect(first.exit?.reason == .jetsam)
        #expect(second.exit?.reason == .jetsam)
        #expect(first.exit?.message?.contains("MemoryBudget 200 MiB") == true)
        #expect((first.endedAt ?? .distantFuture) <= (second.endedAt ?? .distantPast))
        usleep(1_000_000)
        #expect(try daemon.instance(player.id).exit == nil)
        #expect(try daemon.instance(active.id).exit == nil)
        // Warned first: the ones running got didReceiveMemoryWarning, the frozen ones nothing.
        #expect(try daemon.received(player.id).contains("didReceiveMemoryWarning"))
        #expect(try daemon.received(active.id).contains("didReceiveMemoryWarning"))
        #expect(!(try daemon.received(oldest.id).contains("didReceiveMemoryWarning")))
    }

    @Test(
        "a service goes after the ordinary background apps, even when it is the least recently used"
    )
    func serviceLast() throws {
        let daemon = try TestDaemon(
            config: lifecycleConfig(
                "MemoryBudget=160M\nMemoryCheckInterval=0.3\nAllowedBackgroundModes=audio\n"))
        try daemon.installProbe("com.example.service", info: "<key>LSBackgroundOnly</key><true/>")
        try daemon.installProbe(
            "com.example.player",
            info: "<key>UIBackgroundModes</key><array><string>audio</string></array>")
        try daemon.installProbe("com.example.jetsam")
        // The service first (the oldest, never active), then a background player: 100 MiB, both
        // running; then 100 active: 200 MiB, over the budget by one of them.
        let service = try daemon.launch("com.example.service", ["lifecycle", "alloc", "50"])
        #expect(service.service == true)
        let player = try daemon.launch(
            "com.example.player", ["lifecycle", "alloc", "50"], background: true)
        #expect(try daemon.eventually { try daemon.instance(player.id).channel == .ready })
        #expect(try daemon.eventually { try daemon.instance(service.id).channel == .ready })
        let active = try daemon.launch(
            "com.example.jetsam", ["lifecycle", "alloc-after-ready", "100"])
        let ended = try daemon.wait(player.id)
        #expect(ended.exit?.reason == .jetsam)
        usleep(1_000_000)
        let survivor = try daemon.instance(service.id)
        #expect(survivor.exit == nil, "\(survivor.exit?.description ?? "")")
        #expect(try daemon.instance(active.id).exit == nil)
    }

    @Test("the active app is ended only when it alone breaks its own limit")
    func activeOverItsLimit() throws {
        let daemon = try TestDaemon(
            config: lifecycleConfig(
                "MemoryBudget=100M\nActiveMemoryLimit=80M\nMemoryCheckInterval=0.3\n"))
        try daemon.installProbe("com.example.greedy")
        let small = try daemon.launch(
            "com.example.greedy", ["lifecycle", "alloc", "40"], background: true)
        #expect(try daemon.eventually { try daemon.state(small.id) == .suspended })
        let greedy = try daemon.launch("com.example.greedy", ["lifecycle", "alloc", "120"])
        #expect(try daemon.wait(small.id).exit?.reason == .jetsam)
        let ended = try daemon.wait(greedy.id)
        #expect(ended.exit?.reason == .jetsam)
        #expect(ended.exit?.message?.contains("active") == true)
    }
}
