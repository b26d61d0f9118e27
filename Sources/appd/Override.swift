import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import AppdCLI
import AppdClient
import AppdConfig
import ArgumentParser
import Foundation

struct Override: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Narrow one app's entitlements and set its limits, without re-signing it.",
        discussion: """
            Like 'flatpak override': rewrites the app's [App ID] section of appd.conf (the \
            admin's file: --config, APPD_CONFIG, else /etc/appd/appd.conf), keeping every other \
            line and comment, atomically; a file with an error is refused untouched. Then the \
            running daemon reloads it (as 'appd reload'): the limits go at once onto the app's \
            running instances (memory.max, pids.max, cpu.weight; a memory limit below what an \
            instance uses makes the kernel reclaim, then OOM-kill in that instance) and onto \
            its data container's quota; entitlements, open files and background modes take \
            effect at its next launch.

            An override only takes away: --deny drops an entitlement the signer granted, \
            --allow only removes a --deny (an entitlement the signer never granted stays \
            absent). A limit given as 'default' goes back to the host's [Sandbox] value. \
            With no change, or --show, prints the section.

            Examples:
              appd override com.example.notes --memory-max 1G --deny com.apple.security.network.client
              appd override com.example.notes --cpu-weight 50 --no-background
              appd override com.example.notes --reset
              appd override com.example.echo --run-at-load yes --keep-alive on-failure --arguments '--port 7000'

            --run-at-load, --keep-alive, --arguments and --environment make it a service \
            (docs/lifecycle.md, "Services"); they apply from the next launch (RunAtLoad: the \
            next start of appd).
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(InstalledAppIDs.complete))
    var id: String

    @Option(
        help: ArgumentHelp(
            "Memory limit of each instance (e.g. 512M, 1G; at least 16M).", valueName: "size"))
    var memoryMax: String?

    @Option(
        help: ArgumentHelp(
            "Most tasks (threads included) per instance (at least 8).", valueName: "n"))
    var tasksMax: String?

    @Option(help: ArgumentHelp("RLIMIT_NOFILE of the app (at least 64).", valueName: "n"))
    var openFilesMax: String?

    @Option(
        help: ArgumentHelp(
            "Most the data container may hold (e.g. 2G, or infinity).", valueName: "size"))
    var dataQuota: String?

    @Option(
        help: ArgumentHelp(
            "cgroup CPU weight, 1-10000 (the kernel's default is 100).", valueName: "n"))
    var cpuWeight: String?

    @Option(
        help: ArgumentHelp(
            "The host loopback ports it may reach, space-separated, in place of [Sandbox] LoopbackPorts ('' for none).",
            valueName: "ports"))
    var loopbackPorts: String?

    @Option(
        name: .customLong("deny"),
        help: ArgumentHelp(
            "Take an entitlement away (exact key, a prefix ending in *, or *); repeatable.",
            valueName: "entitlement"))
    var deny: [String] = []

    @Option(
        name: .customLong("allow"),
        help: ArgumentHelp(
            "Remove a --deny (never grants what the signer did not); repeatable.",
            valueName: "entitlement"))
    var allow: [String] = []

    @Option(
        help: ArgumentHelp(
            "The only UIBackgroundModes that may keep it running in the background (space-separated: audio location voip fetch processing; 'default': the host's).",
            valueName: "modes"))
    var backgroundModes: String?

    @Flag(
        name: .customLong("no-background"),
        help: "No background mode keeps it running (it is suspended after the grace period).")
    var noBackground = false

    @Option(
        help: ArgumentHelp(
            "Launch (or wake) it every so many seconds ('default': no schedule).",
            valueName: "seconds"))
    var startInterval: String?

    @Option(
        help: ArgumentHelp(
            "Launch (or wake) it at these times: daily, hourly, 'Mon..Fri 09:00', '*-*-* 03:30' ('default': none).",
            valueName: "calendar"))
    var startCalendarInterval: String?

    @Option(
        help: ArgumentHelp(
            "Its shortest background fetch interval in seconds ('default': [Lifecycle] MinimumFetchInterval).",
            valueName: "seconds"))
    var minimumFetchInterval: String?

    @Option(
        help: ArgumentHelp(
            "Launch it when appd starts: yes or no ('default': no).", valueName: "yes|no"))
    var runAtLoad: String?

    @Option(
        help: ArgumentHelp(
            "Launch it again when it ends unasked: yes, on-failure or no ('default': no).",
            valueName: "yes|on-failure|no"))
    var keepAlive: String?

    @Option(
        help: ArgumentHelp(
            "Its arguments for appd's launches and any launch that names none, as one quoted string ('default': none).",
            valueName: "words"))
    var arguments: String?

    @Option(
        help: ArgumentHelp(
            "NAME=value words added to its environment, as one quoted string ('default': none).",
            valueName: "words"))
    var environment: String?

    @Flag(help: "Remove the app's [App ID] section: the host's settings apply again.")
    var reset = false

    @Flag(help: "Only print the section.")
    var show = false

    struct Result: Codable {
        var app: String
        var config: String
        /// The section after the change, `Key: Value`.
        var settings: [String: String]
        var changes: [String]
        var installed: Bool?
        /// nil: the daemon was not asked (nothing changed, or --show); false: not running.
        var reloaded: Bool?
        var applied: [String]?
        var warnings: [String]
    }

    var limitOptions: [(key: String, flag: String, value: String?)] {
        [
            ("MemoryMax", "--memory-max", memoryMax), ("TasksMax", "--tasks-max", tasksMax),
            ("OpenFilesMax", "--open-files-max", openFilesMax),
            ("DataQuota", "--data-quota", dataQuota),
            ("LoopbackPorts", "--loopback-ports", loopbackPorts),
            ("CPUWeight", "--cpu-weight", cpuWeight),
            ("MinimumFetchInterval", "--minimum-fetch-interval", minimumFetchInterval),
            ("RunAtLoad", "--run-at-load", runAtLoad), ("KeepAlive", "--keep-alive", keepAlive),
            ("Arguments", "--arguments", arguments), ("Environment", "--environment", environment),
            ("StartInterval", "--start-interval", startInterval),
            ("StartCalendarInterval", "--start-calendar-interval", startCalendarInterval),
        ]
    }

    func validate() throws {
        if noBackground && backgroundModes != nil {
            throw ValidationError("--no-background and --background-modes contradict each other")
        }
        let editing =
            limitOptions.contains { $0.value != nil } || !deny.isEmpty || !allow.isEmpty
            || backgroundModes != nil || noBackground
        if reset && editing {
            throw ValidationError("--reset removes the whole section: give it alone")
        }
        if show && (editing || reset) {
            throw ValidationError("--show changes nothing: give it alone")
        }
    }

    func run() throws {
        try options.run {
            _ = try BundleIdentifier(validating: id)
            let path = options.configurationSource.path
            var result = try AppdConfiguration.withEditLock(path) { try edit(path) }
            if result.changes.isEmpty || show {
                print(result)
                return
            }
            try reload(&result)
            print(result)
        }
    }

    /// The options as one edit of the section, in the order they apply.
    var overrideEdit: AppOverrideEdit {
        var edit = AppOverrideEdit()
        edit.reset = reset
        edit.values = limitOptions.compactMap { key, flag, value in value.map { (key, flag, $0) } }
        if noBackground { edit.values.append(("BackgroundModes", "--no-background", "")) }
        if let backgroundModes {
            edit.values.append(("BackgroundModes", "--background-modes", backgroundModes))
        }
        edit.deny = deny
        edit.allow = allow
        return edit
    }

    /// Reads, checks, rewrites the file; the daemon is asked afterwards, outside the lock.
    private func edit(_ path: String) throws -> Result {
        let (text, config) = try AppdConfiguration.readForEditing(
            path, explicit: options.configurationSource.explicit)
        let old = config.override(for: id) ?? AppOverride()
        var warnings: [String] = []
        var installed: Bool?
        do {
            let store = try options.openStore(.readOnly)
            installed = (try? store.app(id)) != nil
            if installed == false {
                warnings.append(
                    "\(id) is not installed in \(store.root.path): the section applies once it is")
            }
        } catch let error as AppdError {
            warnings.append("cannot check that \(id) is installed: \(error.message)")
        }
        let (new, editWarnings) = try overrideEdit.applied(to: old)
        warnings += editWarnings

        if new.service.runAtLoad && !old.service.runAtLoad {
            warnings.append(
                "RunAtLoad starts it when appd starts; at boot that needs appd.service enabled, not only appd.socket: systemctl enable appd.service"
            )
        }
        let changes = AppOverride.changes(from: old, to: new)
        var result = Result(
            app: id, config: path,
            settings: Dictionary(new.lines.map { ($0.key, $0.value) }, uniquingKeysWith: { $1 }),
            changes: changes, installed: installed, warnings: warnings)
        guard !changes.isEmpty, !show else { return result }
        try AppdConfiguration.writeOverride(id, new, text: text, config: config, path: path)
        result.warnings = warnings
        return result
    }

    /// Asks the daemon to read the file again, if one runs.
    private func reload(_ result: inout Result) throws {
        let answer: APIReloadResult
        do {
            answer = try options.client.reload()
        } catch {
            if error.code == .unavailable && (error.errno == ENOENT || error.errno == ECONNREFUSED)
            {
                result.reloaded = false
                return
            }
            print(result)
            var failure = error
            failure.message =
                "\(result.config) is written, but the daemon did not reload it: \(error.message)"
            throw failure
        }
        result.reloaded = true
        result.applied = answer.applied ?? []
        var mine = result.config
        if let resolved = realpath(result.config, nil) {
            mine = String(cString: resolved)
            free(resolved)
        }
        if answer.config != mine && answer.config != result.config {
            result.warnings.append(
                "the daemon reads \(answer.config ?? "no file (built-in defaults)"), not \(result.config): this change is not in force there"
            )
        }
    }

    private func print(_ result: Result) {
        if options.json {
            Output.json(result)
            return
        }
        for warning in result.warnings {
            FileHandle.standardError.write(Data("appd: warning: \(warning)\n".utf8))
        }
        let header = "[App \(result.app)] in \(result.config)"
        if result.changes.isEmpty || show {
            let lines = AppOverride.keys.compactMap { key in
                result.settings[key].map { "  \(key)=\($0)" }
            }
            Swift.print(
                lines.isEmpty ? "\(header): none (the host's settings apply)" : "\(header):")
            for line in lines { Swift.print(line) }
            return
        }
        Swift.print("\(header): " + result.changes.joined(separator: ", "))
        switch result.reloaded {
        case true?:
            let applied = result.applied ?? []
            Swift.print(
                applied.isEmpty
                    ? "appd reloaded it: in force from the app's next launch"
                    : "appd reloaded it; applied at once: " + applied.joined(separator: "; "))
        case false?:
            Swift.print("appd is not running: it reads the file when it starts")
        case nil:
            break
        }
    }
}
