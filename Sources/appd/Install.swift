import AppBundle
import AppContainers
import AppdAPI
import AppdCLI
import AppdClient
import AppdServer
import ArgumentParser
import BundleArchive
import Foundation

struct Install: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate a bundle and install it; installing an installed id upgrades it.",
        discussion: """
            The bundle is read with your permissions and streamed to the daemon, which copies \
            it into Containers/Bundle/<UUID>/ (root-owned, read-only) and gives it a data \
            container Containers/Data/<UUID>/ owned by its own uid. An upgrade gets a new \
            bundle container and keeps the data container and uid; the old bundle goes only \
            once the new one is in place. A failed install leaves nothing behind.

            The bundle must be signed (appd sign) by a key appd.conf trusts, for its bundle id \
            and for every entitlement it requests; an upgrade must be signed by the key that \
            signed the installed version. docs/code-signing.md.

            Installing needs the daemon's admin right ([API] AdminAllowed); with --no-daemon, \
            root installs in-process instead.
            """
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var local: LocalMode

    @Flag(help: "Allow replacing an installed version with a lower CFBundleVersion.")
    var allowDowngrade = false

    @Flag(help: "Allow an upgrade signed by another key than the installed version (admins only).")
    var allowSignerChange = false

    @Argument(
        help: ArgumentHelp("The bundle directory.", valueName: "Name.app"), completion: .directory)
    var bundle: String

    func run() throws {
        try options.run {
            let result = try local.noDaemon ? installInProcess() : installThroughDaemon()
            if options.json {
                Output.json(result)
                return
            }
            let app = result.app
            print(Self.summary(of: result))
            app.printText()
            for warning in result.warnings { print("  warning: \(warning)") }
        }
    }

    /// The first line an install prints. `previousVersion` and the app's `version` are both
    /// CFBundleVersion, so they are compared as such (a downgrade needed --allow-downgrade).
    static func summary(of result: APIInstallResult) -> String {
        let app = result.app
        guard let previous = result.previousVersion else {
            return
                "\(result.reusedData ? "Reinstalled (kept data)" : "Installed") \(app.bundleId) \(app.versionText)"
        }
        guard let old = try? BundleVersion(validating: previous),
            let new = try? BundleVersion(validating: app.version ?? "")
        else { return "Replaced \(app.bundleId) \(previous) with \(app.versionText)" }
        if old < new { return "Upgraded \(app.bundleId) from \(previous) to \(app.versionText)" }
        if new < old { return "Downgraded \(app.bundleId) from \(previous) to \(app.versionText)" }
        return "Reinstalled \(app.bundleId) \(app.versionText) (the same version)"
    }

    /// POST /v1/apps with the bundle as a tar stream; the daemon installs what arrives.
    private func installThroughDaemon() throws -> APIInstallResult {
        // The folder's own name (`Hello.app`), however the path was written (`Hello.app/`, `.`).
        let name = URL(fileURLWithPath: bundle).standardizedFileURL.lastPathComponent
        let path = AppdClient.path(
            "apps",
            query: [
                "name": name, "allowDowngrade": allowDowngrade ? "1" : nil,
                "allowSignerChange": allowSignerChange ? "1" : nil,
            ])
        let progress = !options.json && isatty(STDERR_FILENO) == 1 ? UploadProgress() : nil
        defer { progress?.finish() }
        do {
            return try upload(path, progress: progress)
        } catch let error as APIError {
            throw Self.naming(error, bundle: name, as: bundle)
        }
    }

    /// The daemon names the bundle by the folder name it was sent (`Broken.app/Info.plist`);
    /// the person typed a path (`../build/Broken.app`): each mention of the name that starts a
    /// path is given theirs.
    static func naming(_ error: APIError, bundle name: String, as typed: String) -> APIError {
        var shown = typed
        while shown.count > 1, shown.hasSuffix("/") { shown.removeLast() }
        // `.` or `Broken.app/..`: the folder's full path says more than what was typed.
        if (shown as NSString).lastPathComponent != name {
            shown = URL(fileURLWithPath: typed).standardizedFileURL.path
        }
        guard shown != name else { return error }
        func rewrite(_ text: String) -> String {
            var out = ""
            var rest = Substring(text)
            while let range = rest.range(of: name) {
                let before = rest[..<range.lowerBound]
                let startsPath = (before.last ?? out.last).map { " '\"(".contains($0) } ?? true
                let after = rest[range.upperBound...].first
                let endsName = after.map { "/:'\") ".contains($0) } ?? true
                out += before
                out += startsPath && endsName ? shown : name
                rest = rest[range.upperBound...]
            }
            return out + rest
        }
        var copy = error
        copy.message = rewrite(error.message)
        copy.hint = error.hint.map(rewrite)
        copy.problems = error.problems.map { problem in
            var problem = problem
            problem.path = rewrite(problem.path)
            problem.message = rewrite(problem.message)
            return problem
        }
        return copy
    }

    private func upload(_ path: String, progress: UploadProgress?) throws -> APIInstallResult {
        try options.daemonClient().upload(
            path, contentType: "application/x-tar", as: APIInstallResult.self
        ) { write in
            // Read with the caller's permissions, never following a symlink (BundleArchiveWriter).
            try BundleArchiveWriter.write(bundleAt: bundle) { bytes in
                try write(bytes)
                progress?.sent(bytes.count)
            }
            progress?.uploaded()
        }
    }

    private func installInProcess() throws -> APIInstallResult {
        let store = try options.openStore(.readWrite)
        var installOptions = InstallOptions()
        installOptions.allowDowngrade = allowDowngrade
        installOptions.allowSignerChange = allowSignerChange
        installOptions.onWait = options.waitNotice
        if !options.json && isatty(STDERR_FILENO) == 1 {
            installOptions.progress = Progress.copying
        }
        defer { Progress.finish() }
        let result = try store.install(bundleAt: bundle, options: installOptions)
        if let warning = result.signing.warning {
            FileHandle.standardError.write(Data("appd: WARNING: \(warning)\n".utf8))
        }
        Output.warnQuarantined(result.recovery)
        return APIInstallResult(
            app: APIApp(result.app, root: store.root, withEntitlements: true),
            previousVersion: result.previousVersion, reusedData: result.reusedData,
            warnings: result.warnings.map(APIProblem.init))
    }
}
