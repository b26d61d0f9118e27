import AppdAPI
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

struct Launch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "launch",
        abstract: "Launch an app in its sandbox; prints the instance id.",
        discussion: """
            The daemon builds the app's sandbox (see 'appd profile ID'), starts it as the app's \
            own uid and answers at once with the new instance: its id is printed, and the app's \
            output goes to its log ('appctl logs ID'). Arguments for the app come after --.

            --wait waits until the app exits and exits with its code (Ctrl-C stops waiting; the \
            app keeps running). --console also streams the app's output here as it comes, like \
            a program run in the foreground: Ctrl-C terminates the app (a second one kills it, \
            a third leaves without waiting) and appctl exits with the app's code once it has \
            ended. The app gets no input from this terminal.

            The new instance becomes the active app (with the daemon's ActivePolicy=single the \
            active one goes to the background); --background launches it into the background \
            instead, where it is frozen after the grace period (docs/lifecycle.md).

            Examples:
              appctl launch com.example.notes
              appctl launch --console com.example.notes -- --verbose
              appctl launch --wait --json com.example.batch -- --input /dev/null
            """)

    @OptionGroup var options: GlobalOptions

    @Flag(help: "Stream the app's output here until it exits, then exit with its code.")
    var console = false

    @Flag(help: "Wait until the app exits, then exit with its code.")
    var wait = false

    @Flag(help: "Launch it into the background instead of making it the active app.")
    var background = false

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(ShellCompletion.appIDs))
    var id: String

    @Argument(
        parsing: .postTerminator,
        help: ArgumentHelp("Arguments for the app, after --.", valueName: "args"))
    var arguments: [String] = []

    func run() throws {
        var code: Int32 = 0
        try options.run {
            let client = options.client
            let ended: APIInstance
            if console {
                ended = try ConsoleSession(client: client).run(app: id, arguments: arguments)
            } else {
                let instance = try client.launch(
                    id, LaunchRequest(arguments: arguments, background: background))
                guard wait else {
                    if options.json { Output.json(instance) } else { print(instance.id) }
                    return
                }
                // Shown before the wait, which may be long: through stdout's buffer it would not be.
                if !options.json { try Output.raw("\(instance.id)\n") }
                ended = try client.wait(instance.id)
            }
            code = Self.report(ended, json: options.json)
        }
        if code != 0 { throw ExitCode(code) }
    }

    /// Prints the ended instance (JSON) or, in text, how it ended when that was not its own
    /// choice; returns the code to exit with.
    static func report(_ instance: APIInstance, json: Bool) -> Int32 {
        guard let exit = instance.exit else {
            Output.note(
                "appctl: \(instance.app) (\(instance.id)) is still \(instance.state.rawValue): the daemon answered the wait too early"
            )
            if json { Output.json(instance) }
            return 1
        }
        if json {
            Output.json(instance)
        } else if exit.reason == .failedToLaunch {
            Output.note(
                "appctl: \(instance.app) could not be launched: \(exit.message ?? "no reason given")"
            )
        } else if exit.reason != .exited {
            Output.note("appctl: \(instance.app) (\(instance.id)) \(exit)")
        }
        return exit.shellCode
    }
}
