import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `appctl open`: a URL opened by the app that claims its scheme (docs/info-plist.md).
struct Open: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Open a URL with the app that handles its scheme; prints the instance id.",
        discussion: """
            The daemon picks the app: the one --with names (it must claim the item), else the \
            admin's choice in appd.conf's [Handlers], else the app installed first among those \
            whose signed Info.plist claims the URL's scheme (CFBundleURLTypes). It launches a \
            new instance of it with the URL as its last argument, after the app's [App ID] \
            Arguments=. Needs the control right. Opening files (PATH) is not available yet.

            Examples:
              appctl open notes:today
              appctl open --with com.example.notes notes:today
            """)

    @OptionGroup var options: GlobalOptions

    @Option(
        name: .customLong("with"),
        help: ArgumentHelp("Open it with this app, which must claim it.", valueName: "id"),
        completion: .custom(ShellCompletion.appIDs))
    var app: String?

    @Flag(help: "Give a file read-only, even to an app that edits it.")
    var readOnly = false

    @Argument(help: ArgumentHelp("A URL (scheme:...) or a file's path.", valueName: "url|path"))
    var item: String

    func run() throws {
        try options.run {
            var text = item
            if !text.hasPrefix("/") && !Self.looksLikeURL(text) {
                text = FileManager.default.currentDirectoryPath + "/" + text
            }
            let result = try options.client.open(
                OpenRequest(item: text, with: app, readOnly: readOnly))
            if options.json {
                Output.json(result)
            } else {
                print(result.instance.id)
                if let note = result.note { Output.note(note) }
            }
        }
    }

    /// `scheme:` before any `/`: a URL, as RFC 3986 spells a scheme.
    static func looksLikeURL(_ text: String) -> Bool {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else { return false }
        let scheme = text[..<colon]
        return scheme.first!.isLetter
            && scheme.allSatisfy {
                $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0))
            }
    }
}
