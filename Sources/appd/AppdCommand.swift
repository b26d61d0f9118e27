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
        subcommands: [Verify.self, Install.self, Uninstall.self, List.self, Info.self, Doctor.self]
    )
}
