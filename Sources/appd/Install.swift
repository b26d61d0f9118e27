import AppBundle
import AppContainers
import ArgumentParser
import Foundation

struct Install: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate a bundle and install it; installing an installed id upgrades it.",
        discussion: """
            The bundle is copied into Containers/Bundle/<UUID>/ (root-owned, read-only) and gets \
            a data container Containers/Data/<UUID>/ owned by its own uid. An upgrade gets a new \
            bundle container and keeps the data container and uid; the old bundle goes only once \
            the new one is in place. A failed install leaves nothing behind.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Flag(help: "Allow replacing an installed version with a lower CFBundleVersion.")
    var allowDowngrade = false

    @Argument(help: ArgumentHelp("The bundle directory.", valueName: "Name.app"))
    var bundle: String

    func run() throws {
        try options.run {
            let store = try options.openStore(.readWrite)
            var installOptions = InstallOptions()
            installOptions.allowDowngrade = allowDowngrade
            installOptions.onWait = options.waitNotice
            if !options.json && isatty(STDERR_FILENO) == 1 {
                installOptions.progress = Progress.copying
            }
            defer { Progress.finish() }
            let result = try store.install(bundleAt: bundle, options: installOptions)
            Progress.finish()
            let view = AppView(result.app, root: store.root, withEntitlements: true)
            if options.json {
                Output.json(InstallView(app: view, previousVersion: result.previousVersion,
                    reusedData: result.reusedData, warnings: result.bundle.warnings))
                return
            }
            let verb = result.previousVersion.map { "Upgraded \(result.app.bundleID) from \($0) to" }
                ?? (result.reusedData ? "Reinstalled (kept data)" : "Installed")
            print("\(verb) \(result.previousVersion == nil ? result.app.bundleID + " " : "")\(view.versionText)")
            view.printText()
            for warning in result.bundle.warnings { print("  warning: \(warning)") }
        }
    }
}

struct InstallView: Encodable {
    var app: AppView
    var previousVersion: String?
    var reusedData: Bool
    var warnings: [BundleProblem]
}

/// A one-line progress display on a terminal, for big bundles.
enum Progress {
    nonisolated(unsafe) private static var lastDraw: UInt64 = 0
    nonisolated(unsafe) private static var drawn = false

    static let copying: @Sendable (Int, Int64, Int, Int64) -> Void = { files, bytes, totalFiles, totalBytes in
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastDraw > 100_000_000 || files == totalFiles else { return }
        lastDraw = now
        drawn = true
        let line = "copying \(files)/\(totalFiles) files, \(Output.bytes(bytes)) of \(Output.bytes(totalBytes))"
        FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
    }

    static func finish() {
        if drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}
