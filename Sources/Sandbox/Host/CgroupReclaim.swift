import AppdBase
import Glibc

/// What one reclaim gave back (`InstanceCgroup.reclaimMemory`): the instance's usage before and
/// after, the target it was asked down to, and why it stopped above it, if it did.
public struct MemoryReclaim: Sendable, Equatable {
    public enum Method: String, Sendable {
        /// cgroup v2: `memory.reclaim` (Linux 5.19), the bytes to give back written to it.
        case reclaim = "memory.reclaim"
        /// cgroup v1, which has no `memory.reclaim`: `memory.limit_in_bytes` lowered one step
        /// at a time (the kernel reclaims down to it, or refuses with EBUSY and keeps the old
        /// limit) and put back after each step.
        case limitSteps = "memory.limit_in_bytes"
    }

    public var method: Method
    public var target: Int64
    public var before: Int64
    public var after: Int64
    public var seconds: Double
    /// Why it stopped above the target: the kernel found nothing more to give back (no swap
    /// for anonymous memory), the time bound passed, or the instance was thawed. nil when it
    /// reached the target.
    public var stopped: String?

    public var reachedTarget: Bool { after <= target }

    public init(
        method: Method, target: Int64, before: Int64, after: Int64, seconds: Double,
        stopped: String?
    ) {
        self.method = method
        self.target = target
        self.before = before
        self.after = after
        self.seconds = seconds
        self.stopped = stopped
    }
}

/// The two ways of asking the kernel for an instance's memory back, in steps of at most
/// `step` bytes so that the time bound and a thaw are noticed between two writes: one write of
/// `memory.reclaim` cannot be interrupted short of a signal, and a large one on a host with
/// slow swap takes seconds.
enum CgroupReclaim {
    static let step: Int64 = 32 << 20

    /// cgroup v2: `memory.reclaim` on the instance directory (its leaves enable no controller).
    /// EAGAIN means the kernel reclaimed less than asked: nothing more will come.
    static func unified(
        _ directory: CgroupDirectory, target: Int64, timeoutSeconds: Double,
        stop: @Sendable () -> Bool
    ) throws -> MemoryReclaim? {
        guard CgroupFS.exists(directory.file("memory.reclaim")),
            let before = try directory.number("memory.current")
        else { return nil }
        return try steps(
            .reclaim, target: target, before: before, timeoutSeconds: timeoutSeconds, stop: stop,
            current: { try directory.number("memory.current") ?? 0 },
            giveBack: { current in
                switch CgroupFS.write(
                    String(min(current - target, step)), to: directory.file("memory.reclaim"))
                {
                case .success: return nil
                case .failure(let failure) where failure.code == EAGAIN:
                    return "the kernel found no more to reclaim"
                case .failure(let failure):
                    throw AppdError.cgroup("write memory.reclaim", directory.path, failure)
                }
            })
    }

    /// cgroup v1: the limit lowered to `max(target, usage - step)` and put back at once, step
    /// after step. The kernel reclaims down to a new limit before it takes it, and refuses it
    /// with EBUSY (keeping the old one) when it cannot: the app is never left under a limit
    /// it does not fit in. The lowered limit lasts the few microseconds between two writes,
    /// while the app is frozen; only its output relay could allocate then, and it would be
    /// made to reclaim, not killed, unless nothing at all were reclaimable.
    static func limitSteps(
        _ directory: CgroupDirectory, target: Int64, timeoutSeconds: Double,
        stop: @Sendable () -> Bool
    ) throws -> MemoryReclaim? {
        guard let before = try directory.number("memory.usage_in_bytes") else { return nil }
        let limit =
            try directory.read("memory.limit_in_bytes")
            .split(whereSeparator: \.isWhitespace).first.map(String.init) ?? ""
        guard !limit.isEmpty else { return nil }
        return try steps(
            .limitSteps, target: target, before: before, timeoutSeconds: timeoutSeconds,
            stop: stop,
            current: { try directory.number("memory.usage_in_bytes") ?? 0 },
            giveBack: { current in
                let lowered = max(target, current - step)
                // Page aligned, as the kernel rounds; below one page it refuses.
                let value = max(4096, lowered / 4096 * 4096)
                let result = CgroupFS.write(
                    String(value), to: directory.file("memory.limit_in_bytes"))
                let restored = CgroupFS.write(limit, to: directory.file("memory.limit_in_bytes"))
                if case .failure(let failure) = restored {
                    throw AppdError.cgroup(
                        "put memory.limit_in_bytes back to \(limit)", directory.path, failure)
                }
                switch result {
                case .success: return nil
                case .failure(let failure) where failure.code == EBUSY:
                    return "the kernel found no more to reclaim"
                case .failure(let failure):
                    throw AppdError.cgroup("write memory.limit_in_bytes", directory.path, failure)
                }
            })
    }

    /// Gives back a step at a time until the usage is at `target`, `giveBack` says why it
    /// cannot, `stop()` says the instance was thawed, or the time is up.
    private static func steps(
        _ method: MemoryReclaim.Method, target: Int64, before: Int64, timeoutSeconds: Double,
        stop: @Sendable () -> Bool, current: () throws -> Int64,
        giveBack: (Int64) throws -> String?
    ) throws -> MemoryReclaim {
        let started = ContinuousClock.now
        let deadline = Deadline(seconds: timeoutSeconds)
        var now = before
        var stopped: String?
        while now > target {
            if stop() {
                stopped = "thawed"
                break
            }
            if deadline.passed {
                stopped = "time bound of \(timeoutSeconds) s passed"
                break
            }
            if let why = try giveBack(now) {
                now = try current()
                stopped = now > target ? why : nil
                break
            }
            let next = try current()
            if next >= now {
                // A step gave nothing back although the kernel did not say so (v1 rounds).
                now = next
                stopped = "the kernel found no more to reclaim"
                break
            }
            now = next
        }
        let elapsed = started.duration(to: .now).components
        return MemoryReclaim(
            method: method, target: target, before: before, after: now,
            seconds: Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18,
            stopped: stopped)
    }
}
