import AppdAPI
import AppdCLI
import ArgumentParser
import Foundation

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make the running daemon read appd.conf again.",
        discussion: """
            Signers, bundle limits, sandbox and lifecycle settings, API access lists and the \
            supervisor's grace period apply to everything that starts after the reload; running \
            apps are not touched. A file with an error is refused whole (the message names the \
            line) and the settings in force stay. The socket and CgroupParent/LogMaxBytes \
            change only with a restart (listed as 'restart required'). Needs the admin right; \
            the same as 'systemctl reload appd' (SIGHUP), which reports in 'systemctl status appd'.
            """)

    @OptionGroup var options: GlobalOptions

    func run() throws {
        try options.run {
            let result = try options.client.reload()
            if options.json {
                Output.json(result)
                return
            }
            let file = result.config ?? "built-in defaults (no appd.conf)"
            print(
                result.changed.isEmpty
                    ? "Reloaded \(file): nothing changed"
                    : "Reloaded \(file): changed \(result.changed.joined(separator: ", "))")
            if !result.restartRequired.isEmpty {
                print(
                    "restart required for: \(result.restartRequired.joined(separator: ", ")) (the old values stay until then)"
                )
            }
        }
    }
}
