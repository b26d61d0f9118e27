import AppContainers
import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser
import Foundation

struct Uninstall: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove an app: its bundle container, its data container, its uid.",
        discussion: """
            With --keep-data the data container and the uid stay reserved for the app: \
            installing the same id again brings it back to its data ('appd list' shows it as \
            data-kept). Uninstalling a data-kept app without --keep-data removes the data. \
            The daemon refuses while the app runs (appctl terminate ID first).
            """
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var local: LocalMode

    @Flag(help: "Keep the data container (and the uid) for a later reinstall.")
    var keepData = false

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(InstalledAppIDs.complete))
    var id: String

    func run() throws {
        try options.run {
            let result: APIUninstallResult
            if local.noDaemon {
                let store = try options.openStore(.readWrite)
                let local = try store.uninstall(id, keepData: keepData, onWait: options.waitNotice)
                Output.warnQuarantined(local.recovery)
                result = APIUninstallResult(
                    app: APIApp(local.app, root: store.root, withEntitlements: false),
                    keptData: local.keptData)
            } else {
                result = try options.daemonClient().uninstall(id, keepData: keepData)
            }
            let app = result.app
            if options.json {
                Output.json(
                    UninstallView(
                        bundleId: app.bundleId, keptData: result.keptData,
                        dataContainer: result.keptData ? app.dataContainer : nil))
            } else if result.keptData {
                print(
                    "Uninstalled \(app.bundleId); kept its data at \(app.dataContainer) (uid \(app.uid) stays reserved)"
                )
            } else {
                print("Uninstalled \(app.bundleId) and removed its data")
            }
        }
    }
}

/// What `appd uninstall --json` has always printed (the daemon answers with the whole app).
struct UninstallView: Encodable {
    var bundleId: String
    var keptData: Bool
    var dataContainer: String?
}
