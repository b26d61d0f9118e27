import AppdAPI
import AppdBase
import AppdCLI
import AppdClient
import ArgumentParser

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

struct PS: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ps",
        abstract: "List running instances (with --all, ended ones too).",
        discussion: """
            One row per instance: INSTANCE APP STATE PID UPTIME/ENDED EXIT DENIED, and NOTE \
            when an instance is a service (LSBackgroundOnly) or outdated (another version was \
            installed since it started: 'appd install --restart' restarts those), and when \
            appd next wakes its app for a background fetch ('fetch in 14m'). For a running \
            instance the time is how long it has run, for an ended one how long ago it ended; \
            EXIT is the code it exited with or how it was ended (SIGSEGV, killed, \
            out-of-memory...). PID is the launcher's on the host. DENIED counts what the sandbox \
            and appd refused the instance ('appctl denials INSTANCE' lists it). Below, the apps \
            appd.conf runs as services (RunAtLoad, KeepAlive): running, waiting (NEXT TRY is the \
            KeepAlive restart, or 'run in' the next StartInterval/StartCalendarInterval run), stopped, or crash-loop (KeepAliveLimit restarts in a row: appd \
            gave up until the app is launched).

            Examples:
              appctl ps
              appctl ps --all com.example.notes
            """)

    @OptionGroup var options: GlobalOptions

    @Flag(name: [.short, .long], help: "Include instances that have exited.")
    var all = false

    @Argument(
        help: ArgumentHelp(
            "Only this app's instances (or only this instance).", valueName: "id|instance"),
        completion: .custom(ShellCompletion.targets))
    var target: Target?

    func run() throws {
        try options.run {
            let client = options.client
            let instances: [APIInstance]
            switch target {
            case .instance(let id)?:
                instances = [try client.instance(id)]
            case .app(let id)?:
                instances = try client.instances(app: id, all: all)
            case nil:
                instances = try client.instances(all: all)
            }
            let sorted = instances.sorted { $0.startedAt < $1.startedAt }
            if options.json {
                Output.json(sorted)
                return
            } else if sorted.isEmpty {
                let of = target.map { if case .app(let id) = $0 { " of \(id)" } else { "" } } ?? ""
                print(all ? "No instances\(of)." : "No running instances\(of).")
            } else {
                let now = Date()
                let notes = sorted.map(Self.note)
                // NOTE only when there is one: the columns scripts read stay where they were.
                let withNotes = notes.contains { !$0.isEmpty }
                Table.print(
                    [
                        ["INSTANCE", "APP", "STATE", "PID", "UPTIME/ENDED", "EXIT", "DENIED"]
                            + (withNotes ? ["NOTE"] : [])
                    ]
                        + zip(sorted, notes).map {
                            Self.row($0, now: now) + (withNotes ? [$1.isEmpty ? "-" : $1] : [])
                        })
            }
            if case .instance? = target { return }
            // A daemon before services answers 404: it has none to show.
            guard var services = try? client.services() else { return }
            if case .app(let id)? = target {
                services = services.filter { AppID(id).matches($0.app) }
            }
            guard !services.isEmpty else { return }
            print("")
            Table.print(
                [["SERVICE", "STATE", "RESTARTS", "NEXT TRY", "LAST EXIT"]]
                    + services.map { Self.serviceRow($0, now: Date()) })
        }
    }

    /// `service` (LSBackgroundOnly), `outdated (runs 1.0)` once another version was installed,
    /// and `fetch in 14m` when the app asked for background fetches.
    static func note(_ instance: APIInstance) -> String {
        var notes: [String] = []
        if instance.service == true { notes.append("service") }
        if instance.outdated == true { notes.append("outdated (runs \(instance.version ?? "?"))") }
        if let next = instance.nextFetch, instance.state != .exited {
            notes.append("fetch in \(Table.duration(max(0, next.timeIntervalSinceNow)))")
        }
        return notes.joined(separator: ", ")
    }

    static func serviceRow(_ service: APIService, now: Date) -> [String] {
        [
            service.app, service.state.rawValue, "\(service.restarts)/\(service.restartLimit)",
            service.nextTry.map { "in \(Table.duration(max(0, $0.timeIntervalSince(now))))" }
                ?? service.nextRun.map {
                    "run in \(Table.duration(max(0, $0.timeIntervalSince(now))))"
                } ?? "-",
            service.lastExit.map(shortExit) ?? "-",
        ]
    }

    static func row(_ instance: APIInstance, now: Date) -> [String] {
        let time =
            if let ended = instance.endedAt {
                "\(Table.duration(now.timeIntervalSince(ended))) ago"
            } else {
                Table.duration(now.timeIntervalSince(instance.startedAt))
            }
        return [
            instance.id, instance.app, instance.state.rawValue, instance.pid.map { "\($0)" } ?? "-",
            time,
            instance.exit.map(shortExit) ?? "-",
            instance.denials.map { "\($0)" } ?? "-",
        ]
    }

    /// The EXIT column: the code for an app that exited by itself, else how it ended.
    static func shortExit(_ exit: APIExit) -> String {
        switch exit.reason {
        case .exited: exit.code.map { "\($0)" } ?? "exited"
        case .signaled: exit.signal.map(signalName) ?? "signaled"
        default: exit.reason.rawValue
        }
    }

    static func signalName(_ signal: Int32) -> String {
        let names = [
            1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
            7: "SIGBUS", 8: "SIGFPE",
            9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM",
            15: "SIGTERM",
            24: "SIGXCPU", 25: "SIGXFSZ", 31: "SIGSYS",
        ]
        return names[Int(signal)] ?? "signal \(signal)"
    }
}
