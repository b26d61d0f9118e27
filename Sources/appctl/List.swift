import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List installed apps (and uninstalled apps whose data was kept).",
        discussion: "The same table as 'appd list': BUNDLE ID NAME VERSION STATE UID.")

    @OptionGroup var options: GlobalOptions

    func run() throws {
        try options.run {
            let client = options.client
            let apps = try client.apps()
            if options.json {
                Output.json(apps)
            } else if apps.isEmpty {
                // Only to say where nothing is installed.
                let root = (try? client.version())?
                    .stateRoot
                print("No apps installed\(root.map { " in \($0)" } ?? "").")
            } else {
                APIApp.printTable(apps)
            }
        }
    }
}

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show an app: containers, uid, version, requested entitlements, install time.",
        discussion: """
            As 'appd info' prints it, plus how many instances run. Requested entitlements are \
            not granted ones: 'appd profile ID' shows the sandbox the app gets.

            Example:
              appctl info com.example.notes
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(ShellCompletion.appIDs))
    var id: String

    func run() throws {
        try options.run {
            let app = try options.client.app(id)
            if options.json { Output.json(app) } else { app.printText() }
        }
    }
}
