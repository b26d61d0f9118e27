import AppBundle
import AppContainers
import AppdAPI
import AppdCLI
import AppdServer
import ArgumentParser
import Foundation

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a bundle offline and print what it is, or every problem found.",
        discussion: "Changes nothing and needs no privileges. Exits 1 if the bundle has problems."
    )

    @OptionGroup var options: GlobalOptions

    @Argument(help: ArgumentHelp("The bundle directory.", valueName: "Name.app"))
    var bundle: String

    func run() throws {
        try options.run {
            let config = try options.loadConfiguration()
            let app = try AppBundle.open(at: bundle, limits: config.bundleLimits)
            let view = BundleView(app)
            if options.json { Output.json(view) } else { view.printText() }
        }
    }
}

/// A validated bundle as `verify` prints it.
struct BundleView: Encodable {
    var valid = true
    var path: String
    var bundleId: String
    var name: String
    var version: String
    var shortVersion: String?
    var executable: String
    var layout: String
    var fileCount: Int
    var totalBytes: Int64
    var entitlements: APIEntitlements
    var warnings: [BundleProblem]

    init(_ bundle: AppBundle) {
        path = bundle.path
        bundleId = bundle.info.identifier.rawValue
        name = bundle.info.title
        version = bundle.info.version.rawValue
        shortVersion = bundle.info.shortVersion
        executable = bundle.executablePath
        layout = bundle.layout.rawValue
        fileCount = bundle.fileCount
        totalBytes = bundle.totalBytes
        entitlements = APIEntitlements(bundle.entitlements)
        warnings = bundle.warnings
    }

    func printText() {
        print("\(path): valid \(layout) bundle")
        print("  bundle id   \(bundleId)")
        print("  name        \(name)")
        print("  version     \(shortVersion.map { "\($0) (\(version))" } ?? version)")
        print("  executable  \(executable)")
        print("  files       \(fileCount) (\(Output.bytes(totalBytes)))")
        entitlements.printText(indent: "  ")
        for warning in warnings { print("  warning: \(warning)") }
    }
}
