import AppContainers
import AppdAPI
import AppdBase
import AppdCLI
import AppdClient
import ArgumentParser
import CLinux
import Foundation
import Sandbox
import Supervisor

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Launch an installed app in its sandbox, as root, and wait for it.",
        discussion: """
            Builds the app's sandbox (see 'appd profile ID') with appd-exec, in a cgroup of its \
            own with the [Sandbox] limits, and waits until the app exits. With --console the \
            app's stdout and stderr are this terminal's and appd exits with the app's code \
            (128+N if a signal ended it, 127 if the sandbox could not be built). Without it, \
            the output goes to logs/<id>/<instance>.log under the state root, as the \
            daemon's instances' does. SIGTERM, SIGHUP, \
            SIGUSR1 and SIGUSR2 sent to appd reach the app.
            """)

    @OptionGroup var options: GlobalOptions

    @Flag(help: "Attach the app to this terminal: stream its output, exit with its code.")
    var console = false

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(InstalledAppIDs.complete))
    var id: String

    @Argument(
        parsing: .postTerminator,
        help: ArgumentHelp("Arguments for the app, after --.", valueName: "args"))
    var arguments: [String] = []

    func run() throws {
        var status: AppExitStatus = .exited(0)
        try options.run {
            guard geteuid() == 0 else {
                throw AppdError(
                    .permissionDenied, "launching an app needs root for now",
                    hint: "run it with sudo; the daemon (appctl launch) lifts this")
            }
            let store = try options.openStore(.readWrite)
            let app = try store.app(id)
            try store.checkInstalledBundle(app)
            let profile = try store.sandboxProfile(
                for: app, arguments: arguments,
                console: console && isatty(0) == 1)
            let instance = SandboxLaunch.newInstanceID()
            // Without a console the app writes a pipe and the launcher's output relay writes
            // logs/<app>/<instance>.log, as the daemon's instances do, rotated at LogMaxBytes:
            // the app never holds a host file.
            var log: String?
            var logFolder: Int32?
            defer { if let logFolder { close(logFolder) } }
            let output: LaunchOutput
            if console {
                output = .inherited(keepStdin: true)
            } else {
                let folder = try store.openLogFolder(app: app.bundleID)
                logFolder = folder.fd
                output = .relay(
                    LogDestination(
                        folder: folder.fd, name: "\(instance).log",
                        maxBytes: store.config.supervisor.logMaxBytes))
                log = "\(folder.path)/\(instance).log"
            }
            let layout = CgroupLayout.detect()
            let launch = try SandboxLaunch(
                profile: profile, launcher: store.config.sandbox.launcher,
                cgroups: CgroupSettings(
                    parent: Cgroups.parent(
                        configured: store.config.supervisor.cgroupParent, layout: layout,
                        underSystemd: false)),
                output: output)
            // run() closes the pipe once the launcher has it; the folder is closed here.
            status = try launch.run(instance: instance)
            if case .failedToLaunch(let message) = status {
                throw AppdError(.unsupported, "\(app.bundleID) could not be launched: \(message)")
            }
            if options.json {
                Output.json(RunView(bundleId: app.bundleID, exit: status.api, log: log))
            } else if !console {
                print("\(app.bundleID) \(status); output in \(log ?? "-")")
            }
        }
        if status.shellCode != 0 { throw ExitCode(status.shellCode) }
    }
}

struct RunView: Encodable {
    var bundleId: String
    var exit: APIExit
    var log: String?
}
