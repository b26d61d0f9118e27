import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import AppdCLI
import AppdClient
import ArgumentParser
import BundleArchive
import Foundation

struct Install: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate a bundle and install it; installing an installed id upgrades it.",
        discussion: """
            The bundle is a Name.app folder, an .ipa (a zip holding Payload/Name.app, as iOS \
            apps travel), a tar of a bundle folder's contents (tar -C Name.app -cf Name.tar .; \
            --name says what the folder is called if the file's name does not), or - for an .ipa \
            or a tar on stdin. Archives are recognized by their first bytes. An .ipa is checked \
            like a hostile folder (zip bombs, '..' and absolute names, links out of the app, \
            duplicates, encrypted entries are refused) and sent as the same tar stream.

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

            Instances that run while their app is upgraded keep the old version ('appctl ps' \
            marks them outdated); --restart restarts them after the install (as 'appctl \
            restart': the grace period, then the same arguments).
            """
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var local: LocalMode

    @Flag(help: "Allow replacing an installed version with a lower CFBundleVersion.")
    var allowDowngrade = false

    @Flag(help: "Allow an upgrade signed by another key than the installed version (admins only).")
    var allowSignerChange = false

    @Flag(
        help:
            "Restart the app's instances still running an older version (through the daemon only).")
    var restart = false

    @Option(
        help: ArgumentHelp(
            "The bundle folder's name, for a tar archive (default: the archive's file name, .tar → .app).",
            valueName: "Name.app"))
    var name: String?

    @Argument(
        help: ArgumentHelp(
            "A bundle folder, an .ipa (zip with Payload/Name.app), a tar of a bundle folder's contents, or - for an .ipa or tar on stdin.",
            valueName: "Name.app|Name.ipa|Name.tar|-"),
        completion: .file())
    var bundle: String

    func run() throws {
        try options.run {
            let progress = !options.json && isatty(STDERR_FILENO) == 1
            // A --config the daemon would ignore is refused before anything is read.
            let client = local.noDaemon ? nil : try options.daemonClient()
            let limits =
                local.noDaemon ? try options.loadConfiguration().bundleLimits : BundleLimits()
            let source = try InstallSource.open(
                bundle, name: name, limits: limits, countFolder: progress)
            defer { source.close() }
            var result: APIInstallResult
            do {
                result =
                    try client.map {
                        try installThroughDaemon(source, client: $0, progress: progress)
                    } ?? installInProcess(source)
            } catch let error as AppdError {
                let isFolder = if case .folder = source.kind { true } else { false }
                throw Self.viewing(error, bundle: source.name, as: source.shown, folder: isFolder)
            }
            if restart, let client {
                result.restarted = try Self.restartOutdated(result.app.bundleId, client: client)
            }
            if options.json {
                Output.json(result)
                return
            }
            let app = result.app
            Output.line(Self.summary(of: result))
            app.printText()
            for warning in result.warnings { Output.line("  warning: \(warning)") }
            for instance in result.restarted ?? [] {
                print("Restarted as \(instance.id) (\(instance.state.rawValue))")
            }
        }
    }

    func validate() throws {
        if restart && local.noDaemon {
            throw ValidationError(
                "--restart restarts running instances through the daemon: leave out --no-daemon")
        }
    }

    /// `--restart`: each running instance of `app` marked outdated, restarted one after another.
    static func restartOutdated(_ app: String, client: AppdClient) throws -> [APIInstance] {
        let outdated = try client.instances(app: app).filter {
            $0.outdated == true && $0.state != .exited
        }
        return try outdated.map { try client.restart($0.id) }
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
    private func installThroughDaemon(_ source: InstallSource, client: AppdClient, progress: Bool)
        throws
        -> APIInstallResult
    {
        let display = progress ? UploadProgress(totals: source.totals) : nil
        defer { display?.finish() }
        return try client.install(
            name: source.name, allowDowngrade: allowDowngrade,
            allowSignerChange: allowSignerChange
        ) { write in
            try source.write(onFile: display.map { display in { display.file($0) } }) { bytes in
                try write(bytes)
                display?.sent(bytes.count)
            }
            display?.uploaded()
        }
    }

    /// The daemon's errors name the bundle and the archive as subjects, with no path for them:
    /// here the bundle is the path the person typed (`../build/Broken.app`,
    /// `Notes.ipa:Payload/Notes.app`) and the archive the one this command sent.
    static func viewing(_ error: AppdError, bundle name: String, as typed: String, folder: Bool)
        -> AppdError
    {
        var shown = typed
        if folder {
            while shown.count > 1, shown.hasSuffix("/") { shown.removeLast() }
            // `.` or `Broken.app/..`: the folder's full path says more than what was typed.
            if (shown as NSString).lastPathComponent != name {
                shown = URL(fileURLWithPath: typed).standardizedFileURL.path
            }
        }
        return error.viewing(.bundle, as: shown).viewing(.archive, as: "bundle archive")
    }

    private func installInProcess(_ source: InstallSource) throws -> APIInstallResult {
        let store = try options.openStore(.readWrite)
        var installOptions = InstallOptions()
        installOptions.allowDowngrade = allowDowngrade
        installOptions.allowSignerChange = allowSignerChange
        installOptions.onWait = options.waitNotice
        if !options.json && isatty(STDERR_FILENO) == 1 {
            installOptions.progress = Progress.copying
        }
        defer { Progress.finish() }
        let result: InstallResult
        if case .folder(let path) = source.kind {
            result = try store.install(bundleAt: path, options: installOptions)
        } else {
            let display =
                installOptions.progress == nil
                ? nil : UploadProgress(totals: source.totals, verb: "extracting")
            result = try Self.installArchive(
                source, into: store, options: installOptions, progress: display)
        }
        if let warning = result.signing.warning {
            FileHandle.standardError.write(Data("appd: WARNING: \(warning)\n".utf8))
        }
        Output.warnQuarantined(result.recovery)
        return APIInstallResult(
            app: APIApp(result.app, root: store.root, withEntitlements: true),
            previousVersion: result.previousVersion, reusedData: result.reusedData,
            warnings: result.warnings)
    }
}

extension Install {
    /// `--no-daemon` with an archive: what the daemon does, in-process, through the same
    /// `IncomingBundle`: the stream is extracted by the daemon's own extractor, each file
    /// hashed as it is written, and that tree is renamed into staging and checked.
    static func installArchive(
        _ source: InstallSource, into store: AppStore, options: InstallOptions,
        progress: UploadProgress? = nil
    ) throws -> InstallResult {
        let incoming = try IncomingBundle(store: store, name: source.name, shown: source.shown)
        do {
            var extractor = try BundleArchiveExtractor(
                into: incoming.path, limits: store.config.bundleLimits)
            try source.write(onFile: progress.map { progress in { progress.file($0) } }) { bytes in
                try extractor.consume(bytes)
                progress?.sent(bytes.count)
            }
            try extractor.finish()
            progress?.uploaded()
            return try incoming.install(digests: extractor.fileDigests, options: options)
        } catch let error as AppdError {
            throw incoming.viewing(error)
        }
    }
}
