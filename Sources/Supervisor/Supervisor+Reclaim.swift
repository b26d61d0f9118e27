import AppdAPI
import AppdConfig
import Dispatch
import Foundation
import Sandbox
import Synchronization

/// Memory back on freeze (docs/lifecycle.md): once an instance is frozen, the kernel is asked
/// to reclaim its memory down to `[Lifecycle] SuspendedMemory`, as iOS pages a suspended app
/// out instead of killing it. The freeze never waits for it and never fails because of it:
/// the reclaim runs on a queue of its own (a write to `memory.reclaim` blocks while the kernel
/// works, seconds with slow swap), one instance at a time so that ten apps frozen together do
/// not start ten kernel reclaimers, each bounded by `suspendedMemoryTimeout` and stopped
/// between two steps by a thaw. What it gave back is the instance's `memoryReclaim` and a
/// `message` event; jetsam ends the suspended apps that stayed above the target first.
extension Supervisor {
    /// Starts reclaiming the frozen instance's memory (nothing when SuspendedMemory=off).
    func giveMemoryBack(_ entry: inout Instance, _ cgroup: any InstanceCgroup) {
        guard let target = lifecycle.suspendedMemory else { return }
        let stop = ReclaimStop()
        entry.life.reclaim?.stop()
        entry.life.reclaim = stop
        entry.memoryReclaim = nil
        table.entries[entry.id] = entry
        let id = entry.id
        Task {
            let result = await ReclaimQueue.run {
                try cgroup.reclaimMemory(
                    to: target, timeoutSeconds: LifecycleSettings.suspendedMemoryTimeout,
                    stop: { stop.stopped })
            }
            self.memoryGivenBack(id, stop, result)
        }
    }

    /// A thaw stops the reclaim in progress and forgets what the last one gave back.
    func stopReclaim(_ entry: inout Instance) {
        entry.life.reclaim?.stop()
        entry.life.reclaim = nil
        entry.memoryReclaim = nil
    }

    func memoryGivenBack(
        _ id: String, _ stop: ReclaimStop, _ result: Result<MemoryReclaim?, any Error>
    ) {
        guard var entry = table.entries[id], entry.life.reclaim === stop,
            entry.state == .suspended
        else { return }
        switch result {
        case .success(nil):
            return
        case .success(let reclaim?):
            entry.memoryReclaim = reclaim
            table.entries[id] = entry
            publish(.message, entry.api, detail: Self.describe(reclaim))
        case .failure(let error):
            publish(.message, entry.api, detail: "memory not reclaimed: \(error)")
        }
    }

    /// `memory reclaimed: 48 MiB -> 12 MiB (target 16 MiB, memory.reclaim, 35 ms)`.
    static func describe(_ reclaim: MemoryReclaim) -> String {
        func size(_ bytes: Int64) -> String {
            bytes >= 10 << 20 ? "\(bytes >> 20) MiB" : "\(bytes >> 10) KiB"
        }
        let milliseconds = Int((reclaim.seconds * 1000).rounded())
        return "memory reclaimed: \(size(reclaim.before)) -> \(size(reclaim.after)) "
            + "(target \(size(reclaim.target)), \(reclaim.method.rawValue), \(milliseconds) ms"
            + (reclaim.stopped.map { "; stopped above the target: \($0)" } ?? "") + ")"
    }
}

/// Set once the instance is thawed: its reclaim stops before its next step.
final class ReclaimStop: Sendable {
    private let flag = Atomic<Bool>(false)
    var stopped: Bool { flag.load(ordering: .relaxed) }
    func stop() { flag.store(true, ordering: .relaxed) }
}

/// The one thread reclaims run on, never the actor's nor the cooperative pool's (a blocking
/// write there would hold one of its few threads).
enum ReclaimQueue {
    private static let queue = DispatchQueue(label: "appd.memory-reclaim", qos: .utility)

    static func run<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async
        -> Result<Value, any Error>
    {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: Result { try work() }) }
        }
    }
}
