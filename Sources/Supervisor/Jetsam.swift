import AppdAPI
import AppdConfig
import Foundation
import Glibc

/// System-wide memory pressure (`/proc/pressure/memory`): the share of the last 10 s in which
/// some (or all) runnable tasks were stalled waiting for memory.
struct MemoryPressure: Equatable {
    var some10: Double
    var full10: Double

    static func read(path: String = "/proc/pressure/memory") -> MemoryPressure? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return parse(text)
    }

    /// `some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and the same for `full`.
    static func parse(_ text: String) -> MemoryPressure? {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let kind = fields.first,
                let avg10 = fields.first(where: { $0.hasPrefix("avg10=") }).flatMap({
                    Double($0.dropFirst(6))
                })
            else { continue }
            values[String(kind)] = avg10
        }
        guard let some = values["some"] else { return nil }
        return MemoryPressure(some10: some, full10: values["full"] ?? 0)
    }
}

/// A PSI trigger on `/proc/pressure/memory`: the kernel makes the fd ready (POLLPRI) when tasks
/// were stalled on memory for more than `stall` µs of a `window` µs window, at most once per
/// window. Jetsam learns of pressure from it instead of reading the file every check.
struct PressureTrigger {
    let fd: Int32
    let token: KernelEvents.Token

    /// `kind` is `some` or `full`; nil when the kernel offers no PSI or refuses the trigger.
    /// A 1 s window needs CAP_SYS_RESOURCE; without it the kernel takes only multiples of 2 s.
    static func open(
        _ kind: String, percent: Double, events: KernelEvents,
        path: String = "/proc/pressure/memory",
        handler: @escaping KernelEvents.Handler
    ) -> PressureTrigger? {
        guard percent.isFinite, percent > 0, percent <= 100 else { return nil }
        for window in [1_000_000.0, 2_000_000.0] {
            let fd = Glibc.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            let stall = max(1, min(window, (percent / 100 * window).rounded()))
            // The kernel overwrites the last byte of the write with NUL: it must be one.
            let text = "\(kind) \(Int64(stall)) \(Int64(window))\0"
            let written = text.utf8CString.withUnsafeBufferPointer {
                write(fd, $0.baseAddress, $0.count - 1)
            }
            let failure = errno
            if written > 0,
                let token = try? events.add(fd, events: KernelEvents.priority, handler: handler)
            {
                return PressureTrigger(fd: fd, token: token)
            }
            Glibc.close(fd)
            guard written < 0, failure == EINVAL else { return nil }
        }
        return nil
    }

    func close(events: KernelEvents) {
        events.remove(token, fd: fd)
        Glibc.close(fd)
    }
}

/// What jetsam remembers between two checks.
struct JetsamState {
    /// Apps were warned in this episode of pressure; kills may follow on the next check. Cleared
    /// when the pressure is gone, so the next episode warns again.
    var warned = false
    var running = false
    /// The PSI triggers armed, for the thresholds they were armed with (a reload may change
    /// them). Empty: none is wanted, or the kernel offers none; then the file is read each check.
    var triggers: [PressureTrigger] = []
    var armedFor: (warning: Double, critical: Double)?
    /// A trigger fired: every check reads the pressure until then (avg10 follows the stall
    /// the trigger saw over a few seconds).
    var episodeUntil = Date.distantPast
}

/// Jetsam: reclaims memory the way iOS does. Over the budget (`[Lifecycle] MemoryBudget`, the
/// sum of every instance cgroup's usage) or at critical pressure (PSI `full`), every app is
/// first sent didReceiveMemoryWarning; if that did not help by the next check, suspended apps
/// are killed (those whose memory could not be reclaimed first, then least recently used
/// first, without a word to them), then background and
/// inactive ones, and the active app only when it alone uses more than `ActiveMemoryLimit`.
/// Every kill is recorded with reason `jetsam` and why that instance was chosen.
///
/// What it costs with many idle instances: pressure arrives as PSI trigger events on the
/// supervisor's epoll thread (KernelEvents); the budget is watched through the apps' parent
/// cgroup, one file read per `MemoryCheckInterval` whatever the number of instances. Only when
/// one of them says memory is short does a check read every live instance's usage.
extension Supervisor {
    func startJetsam() {
        guard !jetsam.running else { return }
        jetsam.running = true
        armPressureTriggers()
        let interval = lifecycle.memoryCheckInterval
        Task { [weak self] in
            while let self, !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
                guard await !self.stopping else { return }
                await self.memoryTick()
            }
        }
    }

    /// (Re)arms the PSI triggers for the thresholds of `[Lifecycle]` now in force.
    func armPressureTriggers() {
        let settings = lifecycle
        if let armed = jetsam.armedFor,
            armed == (settings.memoryPressureWarning, settings.memoryPressureCritical)
        {
            return
        }
        for trigger in jetsam.triggers { trigger.close(events: kernelEvents) }
        jetsam.triggers = []
        jetsam.armedFor = (settings.memoryPressureWarning, settings.memoryPressureCritical)
        let raised: KernelEvents.Handler = { [weak self] _ in
            guard let self else { return }
            Task { await self.pressureRaised() }
        }
        for (kind, percent) in [
            ("some", settings.memoryPressureWarning), ("full", settings.memoryPressureCritical),
        ] where percent > 0 {
            guard
                let trigger = PressureTrigger.open(
                    kind, percent: percent, events: kernelEvents, handler: raised)
            else {
                // One missing: read the file every check instead, for both.
                for trigger in jetsam.triggers { trigger.close(events: kernelEvents) }
                jetsam.triggers = []
                return
            }
            jetsam.triggers.append(trigger)
        }
    }

    /// Whether PSI triggers watch every pressure threshold that is on.
    var pressureWatched: Bool {
        let settings = lifecycle
        let wanted =
            (settings.memoryPressureWarning > 0 ? 1 : 0)
            + (settings.memoryPressureCritical > 0 ? 1 : 0)
        return jetsam.triggers.count == wanted
    }

    func pressureRaised() {
        guard !stopping else { return }
        jetsam.episodeUntil = Date().addingTimeInterval(10)
        checkMemory()
    }

    /// Every `MemoryCheckInterval`: nothing, or one read of the parent cgroup's usage, unless
    /// memory is short (near the budget, a trigger fired lately, apps were warned), when
    /// `checkMemory` reads each live instance.
    func memoryTick() {
        armPressureTriggers()
        let settings = lifecycle
        var suspect = jetsam.warned || jetsam.episodeUntil > Date()
        var pressure: MemoryPressure?
        if !suspect, !pressureWatched {
            pressure = MemoryPressure.read()
            suspect =
                (settings.memoryPressureWarning > 0
                    && (pressure?.some10 ?? 0) >= settings.memoryPressureWarning)
                || (settings.memoryPressureCritical > 0
                    && (pressure?.full10 ?? 0) >= settings.memoryPressureCritical)
        }
        if !suspect, let budget = settings.memoryBudget {
            // The parent holds every instance; nil (no accounting there): ask each instance.
            let used = try? driver.appsMemory()
            suspect = used.map { $0 > budget / 10 * 9 } ?? true
        }
        guard suspect else { return }
        checkMemory(pressure: pressure ?? MemoryPressure.read())
    }

    func checkMemory(pressure: MemoryPressure? = MemoryPressure.read()) {
        let settings = lifecycle
        // Instances already on their way out are not counted: their memory is going.
        let live = table.entries.values.filter { InstanceLifecycle.level($0.state) != nil }
        guard !live.isEmpty else {
            jetsam.warned = false
            return
        }
        var usage: [String: Int64] = [:]
        for entry in live { usage[entry.id] = (try? entry.cgroup?.memory())??.current ?? 0 }
        let total = usage.values.reduce(0, +)
        let overBudget = settings.memoryBudget.map { total > $0 } ?? false
        let critical =
            settings.memoryPressureCritical > 0
            && (pressure?.full10 ?? 0) >= settings.memoryPressureCritical
        let nearBudget = settings.memoryBudget.map { total > $0 / 10 * 9 } ?? false
        let warning =
            settings.memoryPressureWarning > 0
            && (pressure?.some10 ?? 0) >= settings.memoryPressureWarning
        guard overBudget || critical || nearBudget || warning else {
            jetsam.warned = false
            return
        }
        if !jetsam.warned {
            jetsam.warned = true
            let reached = memoryWarning()
            let why =
                overBudget || nearBudget
                ? "apps use \(Self.mebibytes(total)) of MemoryBudget \(Self.mebibytes(settings.memoryBudget ?? 0))"
                : "memory pressure some \(pressure?.some10 ?? 0)% full \(pressure?.full10 ?? 0)%"
            hub.publish { seq in
                APIEvent(
                    seq: seq, time: Date(), kind: .message, app: "-",
                    detail: "memory warning to \(reached.count) app(s): \(why)")
            }
            return
        }
        guard overBudget || critical else { return }

        let victims = Self.jetsamVictims(
            live, usage: usage, settings: settings, pressure: pressure, critical: critical)
        for victim in victims {
            var entry = victim.entry
            end(&entry, .jetsam, message: victim.message)
        }
    }

    /// Whom one check over the budget (or at critical pressure) ends, in order, each with the
    /// exit's message: suspended instances, then background and inactive ones, each least
    /// recently used first, then services (oldest first); the active app last and only for its
    /// own excess over `ActiveMemoryLimit`. Over the budget it stops once the rest fit; at
    /// pressure alone (which says nothing of how much) it takes one.
    static func jetsamVictims(
        _ live: [Instance], usage: [String: Int64], settings: LifecycleSettings,
        pressure: MemoryPressure?, critical: Bool
    ) -> [(entry: Instance, message: String)] {
        var total = usage.values.reduce(0, +)
        let overBudget = settings.memoryBudget.map { total > $0 } ?? false
        func recency(_ entry: Instance) -> Date { entry.lastActiveAt ?? entry.startedAt }
        let ordinary = live.filter { $0.service != true }
        // Suspended apps whose memory the kernel gave back (down to SuspendedMemory) are
        // kept longest, as iOS keeps the ones it paged out: those that stayed above go first.
        func keptMemory(_ entry: Instance) -> Bool { entry.memoryReclaim?.reachedTarget != true }
        let suspended = ordinary.filter { $0.state == .suspended }.sorted {
            keptMemory($0) != keptMemory($1) ? keptMemory($0) : recency($0) < recency($1)
        }
        let background = ordinary.filter {
            [InstanceState.background, .inactive].contains($0.state)
        }.sorted { recency($0) < recency($1) }
        let services = live.filter { $0.service == true }.sorted { recency($0) < recency($1) }
        let activeLimit = settings.activeMemoryLimit ?? settings.memoryBudget
        let active = live.filter { entry in
            entry.state == .active
                && activeLimit.map { limit in (usage[entry.id] ?? 0) > limit } ?? false
        }
        var chosen: [(entry: Instance, message: String)] = []
        for victim in suspended + background + services + active {
            let used = usage[victim.id] ?? 0
            let reason =
                settings.memoryBudget.map { budget in
                    total > budget
                        ? "apps used \(mebibytes(total)) of MemoryBudget \(mebibytes(budget))"
                        : ""
                } ?? ""
            let pressureText = critical ? "memory pressure full \(pressure?.full10 ?? 0)%" : ""
            let why = [reason, pressureText].filter { !$0.isEmpty }.joined(separator: ", ")
            chosen.append(
                (
                    victim,
                    "\(why); this instance used \(mebibytes(used)) and was \(victim.state.rawValue)"
                        + (victim.state == .active
                            ? " over ActiveMemoryLimit"
                            : victim.service == true
                                ? ", a service, ended once no ordinary background app was left"
                                : victim.state == .suspended && keptMemory(victim)
                                    && settings.suspendedMemory != nil
                                    ? ", its memory not reclaimed to SuspendedMemory"
                                    : ", least recently used of those left")
                ))
            total -= used
            // Budget met: stop. Pressure alone says nothing of how much: one instance per check.
            if let budget = settings.memoryBudget, overBudget {
                if total <= budget { break }
            } else {
                break
            }
        }
        return chosen
    }

    static func mebibytes(_ bytes: Int64) -> String {
        "\(bytes >> 20) MiB"
    }
}
