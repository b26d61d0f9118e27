import AppdAPI
import AppdBase
import AppdConfig
import Foundation

/// Scheduled services (docs/lifecycle.md, "Scheduled services"): `[App ID] StartInterval=` and
/// `StartCalendarInterval=` launch the app (or wake its suspended instance) on time, as
/// launchd's keys and systemd's timers do. The decisions are ServiceSchedule's; the last runs
/// are kept in the state root, so a run missed while appd was down runs once at its start.
extension Supervisor {
    var serviceRunsPath: String { "\(stateRoot)/service-runs.json" }

    /// The apps appd.conf schedules, with their settings.
    var scheduledApps: [AppID: ServiceSettings] {
        configuration.current.apps.filter { $0.value.service.isScheduled }.mapValues(\.service)
    }

    /// The app's next scheduled run, if it has a schedule.
    func nextScheduledRun(_ app: AppID) -> Date? {
        guard let settings = scheduledApps[app], let run = scheduled.runs[app] else { return nil }
        return ServiceSchedule.next(settings, run)
    }

    /// The last runs the previous daemon left (`start()`, after adoption and RunAtLoad): a run
    /// missed meanwhile is due at once.
    func loadServiceSchedule() {
        if let data = FileManager.default.contents(atPath: serviceRunsPath),
            let schedule = ServiceSchedule.decoded(data)
        {
            scheduled = schedule
        }
        serviceScheduleChanged()
    }

    /// After a run, a load or a reload: the records follow appd.conf, are written (to a
    /// temporary name, renamed), and the timer sleeps until the next run.
    func serviceScheduleChanged() {
        let apps = scheduledApps
        let changed = scheduled.reconcile(apps, now: Date())
        // Rare (a run, a start, a reload): written each time there is anything to keep.
        if changed || !scheduled.runs.isEmpty, let data = try? scheduled.encoded() {
            try? data.write(to: URL(fileURLWithPath: serviceRunsPath), options: .atomic)
        }
        scheduleTimer &+= 1
        guard !stopping, let next = scheduled.nextRun(apps) else { return }
        let generation = scheduleTimer
        let delay = min(max(0, next.timeIntervalSinceNow), 86400)
        Task {
            try? await Task.sleep(nanoseconds: UInt64(delay * 1e9))
            self.scheduledRunsDue(generation)
        }
    }

    func scheduledRunsDue(_ generation: Int) {
        guard !stopping, generation == scheduleTimer else { return }
        let now = Date()
        for app in scheduled.due(scheduledApps, now: now) { runScheduled(app, now: now) }
        serviceScheduleChanged()
    }

    /// The run of `app` that is due: launched when nothing of it runs, its suspended instance
    /// woken into the background (frozen again after the grace period), or nothing when it
    /// runs already. Each counts as the run: the next one is one interval (or calendar step)
    /// later, however many were missed.
    func runScheduled(_ app: AppID, now: Date) {
        let label =
            scheduledApps[app]?.startCalendar != nil ? "StartCalendarInterval" : "StartInterval"
        let missed = nextScheduledRun(app).map { now.timeIntervalSince($0) > 60 } ?? false
        scheduled.ran(app, now: now)
        let live = table.entries.values.filter { $0.app == app && $0.state != .exited }
        if live.isEmpty, table.launches(of: app) == 0 {
            guard (try? catalog.app(app.spelling)) != nil else {
                notice(app, "\(label): not started: \(app) is not installed")
                return
            }
            if missed {
                notice(app, "\(label): a run was missed while appd was down: running it once now")
            }
            launchService(app, origin: .scheduled, generation: nil)
        } else if var entry = live.filter({ $0.state == .suspended }).min(by: {
            $0.startedAt < $1.startedAt
        }) {
            do {
                try move(&entry, to: .background, detail: label)
                entry.life.backgroundSince = now
                save(entry)
                scheduleBackgroundCheck(entry.id, after: lifecycle.backgroundGracePeriod)
                notice(app, "\(label): woke instance \(entry.id)")
            } catch {
                notice(app, "\(label): cannot wake instance \(entry.id): \(error)")
            }
        } else {
            notice(
                app,
                "\(label): already running (\(live.map(\.id).sorted().joined(separator: ", ")))")
        }
    }
}
