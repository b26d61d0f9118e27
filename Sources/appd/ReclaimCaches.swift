import AppdAPI
import AppdCLI
import ArgumentParser
import Foundation

struct ReclaimCaches: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reclaim-caches",
        abstract: "Empty apps' Library/Caches to free space; print what was freed.",
        discussion: """
            As iOS does when a device runs short of space, and as appd does by itself below \
            [Storage] ReclaimCachesBelow in appd.conf. With an app id: that app's Caches \
            (refused while it runs). Without: the Caches of apps with no running instance, \
            least recently launched first, until the state root's filesystem is above \
            ReclaimCachesBelow (every such app's when it is not set). A running app's Caches \
            are never touched; no link the app made is followed. Needs the admin right.

            Examples:
              appd reclaim-caches
              appd reclaim-caches com.example.notes
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(
        help: ArgumentHelp("Only this app (its bundle id; case does not matter).", valueName: "id"))
    var id: String?

    func run() throws {
        try options.run {
            let result = try options.client.reclaimCaches(app: id)
            if options.json { return Output.json(result) }
            for app in result.reclaimed {
                Output.line(
                    "\(app.app): \(Output.bytes(app.bytes)) freed (\(app.entries) entr\(app.entries == 1 ? "y" : "ies") removed from Library/Caches)"
                )
            }
            for app in result.running { Output.line("\(app): running, its Caches left alone") }
            let freed = result.reclaimed.reduce(Int64(0)) { $0 + $1.bytes }
            var summary = "\(Output.bytes(freed)) freed in all"
            if let after = result.freeBytesAfter, let total = result.totalBytes, total > 0 {
                summary +=
                    "; \(Output.bytes(after)) free of \(Output.bytes(total)) on the state root's filesystem"
            }
            if let level = result.level { summary += " (ReclaimCachesBelow=\(level))" }
            Output.line(summary)
        }
    }
}
