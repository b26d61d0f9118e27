import AppBundle
import AppContainers
import ArgumentParser
import Foundation

struct Uninstall: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove an app: its bundle container, its data container, its uid.",
        discussion: """
            With --keep-data the data container and the uid stay reserved for the app: \
            installing the same id again brings it back to its data ('appd list' shows it as \
            data-kept). Uninstalling a data-kept app without --keep-data removes the data.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Flag(help: "Keep the data container (and the uid) for a later reinstall.")
    var keepData = false

    @Argument(help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"))
    var id: String

    func run() throws {
        try options.run {
            let store = try options.openStore(.readWrite)
            let result = try store.uninstall(id, keepData: keepData, onWait: options.waitNotice)
            let view = AppView(result.app, root: store.root, withEntitlements: false)
            if options.json {
                Output.json(UninstallView(bundleId: result.app.bundleID, keptData: result.keptData,
                    dataContainer: result.keptData ? view.dataContainer : nil))
            } else if result.keptData {
                print("Uninstalled \(result.app.bundleID); kept its data at \(view.dataContainer) (uid \(result.app.uid) stays reserved)")
            } else {
                print("Uninstalled \(result.app.bundleID) and removed its data")
            }
        }
    }
}

struct UninstallView: Encodable {
    var bundleId: String
    var keptData: Bool
    var dataContainer: String?
}
