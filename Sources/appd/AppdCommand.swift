import AppBundle
import AppContainers
import ArgumentParser
import Foundation

@main
struct AppdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appd",
        abstract: "Install and manage sandboxed app bundles (Name.app) on Linux.",
        discussion: """
            appd installs iOS/macOS-style app bundles into containers at random UUID paths: a \
            read-only bundle container and a data container owned by the app's own uid.

            The state root is /var/lib/appd unless --root or APPD_ROOT says otherwise; settings \
            come from /etc/appd/appd.conf (or --config / APPD_CONFIG) when it exists.
            """,
        version: "0.1.0",
        subcommands: [
            Verify.self, Install.self, Uninstall.self, List.self, Info.self, Profile.self, Run.self, Serve.self,
            Doctor.self,
        ]
    )

    /// Accepts the global options on either side of the subcommand, as git does:
    /// `appd --root /tmp/r list` and `appd list --root /tmp/r` mean the same.
    static func main() {
        main(hoistingGlobalOptions(Array(CommandLine.arguments.dropFirst())))
    }

    static func hoistingGlobalOptions(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if ["--root", "--config"].contains(argument), index + 1 < arguments.count {
                leading += arguments[index...index + 1]
                index += 2
            } else if argument == "--json" || argument.hasPrefix("--root=") || argument.hasPrefix("--config=") {
                leading.append(argument)
                index += 1
            } else {
                break
            }
        }
        guard !leading.isEmpty, index < arguments.count else { return arguments }
        return [arguments[index]] + leading + arguments[(index + 1)...]
    }
}
