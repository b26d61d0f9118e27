import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser

struct Container: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "container",
        abstract: "Print the path of an app's container: data, bundle, or an app group's.",
        discussion: """
            Like 'xcrun simctl get_app_container': only the path, for scripts. 'data' is the \
            app's home (owned by its uid), 'bundle' the installed bundle (read-only), 'group \
            NAME' the shared container of an application group the app is entitled to.

            Examples:
              ls "$(appctl container com.example.notes data)/Documents"
              appctl container com.example.notes group group.com.example.shared
            """)

    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case data, bundle, group
    }

    @OptionGroup var options: GlobalOptions

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(ShellCompletion.appIDs))
    var id: String

    @Argument(help: "Which container.")
    var kind: Kind

    @Argument(help: ArgumentHelp("For 'group': the application-group id.", valueName: "name"))
    var group: String?

    func validate() throws {
        switch (kind, group) {
        case (.group, nil):
            throw ValidationError(
                "'group' needs the application-group id: appctl container \(id) group NAME")
        case (.data, _?), (.bundle, _?): throw ValidationError("only 'group' takes a name")
        default: break
        }
    }

    func run() throws {
        try options.run {
            let client = options.client
            let container =
                if let group { try client.groupContainer(id, group: group) } else {
                    try client.container(id, kind: kind.rawValue)
                }
            if options.json { Output.json(container) } else { print(container.path) }
        }
    }
}
