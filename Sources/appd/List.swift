import AppContainers
import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser
import Foundation

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List installed apps (and uninstalled apps whose data was kept).")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var local: LocalMode

    func run() throws {
        try options.run {
            let apps: [APIApp]
            let root: String?
            if local.noDaemon {
                let store = try options.openStore(.readOnly)
                apps = try store.apps().map {
                    APIApp($0, root: store.root, withEntitlements: false)
                }
                root = store.root.path
            } else {
                let client = try options.daemonClient()
                apps = try client.apps()
                // Only to say where nothing is installed.
                root =
                    apps.isEmpty
                    ? (try? client.version())?
                        .stateRoot : nil
            }
            if options.json {
                Output.json(apps)
            } else if apps.isEmpty {
                print("No apps installed\(root.map { " in \($0)" } ?? "").")
            } else {
                APIApp.printTable(apps)
            }
        }
    }
}

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show an app: containers, uid, version, requested entitlements, install time.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var local: LocalMode

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(InstalledAppIDs.complete))
    var id: String

    func run() throws {
        try options.run {
            let app: APIApp
            if local.noDaemon {
                let store = try options.openStore(.readOnly)
                var local = APIApp(try store.app(id), root: store.root, withEntitlements: true)
                local.adminOverride = APIApp.adminOverride(store.config.override(for: id))
                local.storage = APIStorage(store.storageUsage(of: try store.app(id)))
                app = local
            } else {
                app = try options.daemonClient().app(id)
            }
            if options.json { Output.json(app) } else { app.printText() }
        }
    }
}
