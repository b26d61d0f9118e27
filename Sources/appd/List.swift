import AppBundle
import AppContainers
import ArgumentParser
import Foundation

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List installed apps (and uninstalled apps whose data was kept).")

    @OptionGroup var options: GlobalOptions

    func run() throws {
        try options.run {
            let store = try options.openStore(.readOnly)
            let apps = try store.apps().map { AppView($0, root: store.root, withEntitlements: false) }
            if options.json {
                Output.json(apps)
                return
            }
            guard !apps.isEmpty else {
                print("No apps installed in \(store.root.path).")
                return
            }
            let rows = [["BUNDLE ID", "NAME", "VERSION", "STATE", "UID"]]
                + apps.map { [$0.bundleId, $0.title ?? "-", $0.versionText, $0.state, "\($0.uid)"] }
            let widths = (0..<5).map { column in rows.map { $0[column].count }.max() ?? 0 }
            for row in rows {
                print(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }
                    .joined(separator: "  ").trimmingCharacters(in: .whitespaces))
            }
        }
    }
}

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show an app: containers, uid, version, requested entitlements, install time.")

    @OptionGroup var options: GlobalOptions

    @Argument(help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"))
    var id: String

    func run() throws {
        try options.run {
            let store = try options.openStore(.readOnly)
            let view = AppView(try store.app(id), root: store.root, withEntitlements: true)
            if options.json { Output.json(view) } else { view.printText() }
        }
    }
}
