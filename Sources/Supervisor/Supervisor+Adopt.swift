import AppdAPI
import Foundation
import Glibc

/// What a start found of the previous daemon's instances.
public struct AdoptionReport: Sendable {
    /// Still running: watched again, controllable as before.
    public var adopted: [String] = []
    /// Ended while no daemon ran: their status was read and recorded.
    public var ended: [String] = []
    /// Records that could not be read (removed).
    public var unreadable: [String] = []
}

extension Supervisor {
    /// Re-adopts what the previous daemon left: a record whose launcher is still the same
    /// process (pid and start time match) is watched again through a new pidfd; one whose
    /// launcher is gone is closed with the status the launcher wrote. Then starts the slow sweep
    /// that would catch an exit the event loop missed. Call once, before serving.
    public func start() -> AdoptionReport {
        var report = AdoptionReport()
        let loaded = records.loadAll()
        for name in loaded.unreadable { unlink("\(records.directory)/\(name)") }
        report.unreadable = loaded.unreadable
        for record in loaded.records {
            let id = record.id
            var entry = InstanceLifecycle.adopted(record)
            let cgroup = try? driver.open(instance: id, app: record.app.spelling)
            entry.cgroup = cgroup ?? nil
            let launcherStart = record.pid.flatMap(ProcessInfoReader.startTime)
            switch InstanceLifecycle.adoption(of: record, launcherStartTime: launcherStart) {
            case .keepExited:
                table.entries[id] = entry
                continue
            case .closeAsEnded:
                table.entries[id] = entry
                launcherEnded(id)
                report.ended.append(id)
                continue
            case .watch(let pid):
                denials.register(
                    instance: id, app: record.app, uid: record.uid,
                    cgroups: (cgroup ?? nil)?.directories ?? [])
                denials.setCgroups(
                    instance: id, cgroups: (cgroup ?? nil)?.directories ?? [], launcherPid: pid)
                // An exit the watcher sees is handled by a task that runs after this one, when
                // the entry is in place.
                entry.watcher = watch(id: id, pid: pid)
            }
            // The grace period starts again now: set before the entry is stored (it is a value;
            // set after, the background check found no start and never froze the instance).
            if entry.state == .background { entry.life.backgroundSince = Date() }
            table.entries[id] = entry
            if record.state == .terminating, let deadline = record.graceDeadline {
                scheduleGraceKill(id, after: max(0, deadline.timeIntervalSinceNow))
            }
            if entry.state == .background {
                scheduleBackgroundCheck(id, after: lifecycle.backgroundGracePeriod)
            }
            report.adopted.append(id)
        }
        pruneExited()
        Task { [weak self] in
            while let self, !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(Self.exitSweepInterval * 1e9))
                guard await !self.stopping else { return }
                await self.checkExits()
                self.denials.pollFilterCounters()
            }
        }
        startJetsam()
        loadFetchSchedule()
        markOutdatedAdopted()
        runAtLoad()
        loadServiceSchedule()
        return report
    }
}
