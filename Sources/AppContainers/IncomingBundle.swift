import AppdBase
import Foundation
import Glibc

/// A bundle that arrives as an archive, the one install sequence the daemon (`POST /v1/apps`,
/// streamed) and `appd install --no-daemon` (in-process) share: a folder
/// `<root>/incoming/<uuid>/Name.app` (root-only) the caller's extractor writes into, each file
/// hashed as it is written; then `install` renames that tree into staging and checks it as a
/// bundle folder is checked, so its bytes are written once. The folder goes with this value.
///
/// Errors about the bundle have it as their subject; in this process they show it by `shown`
/// (what the person gave: `Notes.ipa:Payload/Notes.app`, or the bare `Name.app` the client
/// sent), never by this folder. Over the API the subject goes without a view: the client shows
/// it by its own path for the bundle.
public final class IncomingBundle: Sendable {
    /// Where the extractor writes: `<root>/incoming/<uuid>/Name.app`.
    public let path: String
    /// `<root>/incoming/<uuid>`, removed with this value.
    let folder: String
    /// The bundle as its errors name it.
    let shown: String
    let store: AppStore

    /// Makes the folder for `name` (`Hello.app`, one path component, checked by the caller);
    /// `shown` is what errors call the bundle (nil: `name`).
    public init(store: AppStore, name: String, shown: String? = nil) throws {
        self.store = store
        self.shown = shown ?? name
        let incoming = "\(store.root.path)/incoming"
        guard mkdir(incoming, 0o700) == 0 || errno == EEXIST else {
            throw AppdError.system("mkdir \(incoming)")
        }
        folder = "\(incoming)/\(UUID().uuidString)"
        guard mkdir(folder, 0o700) == 0 else { throw AppdError.system("mkdir \(folder)") }
        path = "\(folder)/\(name)"
        guard mkdir(path, 0o755) == 0 else {
            let error = AppdError.system("mkdir \(path)")
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    deinit { discard() }

    /// Removes the folder and what was extracted into it. A failed install calls it before it
    /// answers, so that the client, told of the failure, finds nothing left (the deinit alone
    /// may run after the answer).
    public func discard() { try? FileManager.default.removeItem(atPath: folder) }

    /// Installs the extracted tree; `digests` are the extractor's, by relative path.
    public func install(digests: [String: [UInt8]], options: InstallOptions = .init()) throws
        -> InstallResult
    {
        do {
            return try store.install(extractedBundleAt: path, digests: digests, options: options)
        } catch let error as AppdError {
            throw viewing(error)
        }
    }

    /// `error` (the extractor's or the installer's) with the bundle shown by the name the
    /// person knows it by.
    public func viewing(_ error: AppdError) -> AppdError {
        error.viewing(.bundle, as: shown)
    }
}
