import AppBundle
import Foundation

/// The installed bundle's Info.plist, read when a key of it decides something at run time
/// (docs/info-plist.md): the bundle is sealed read-only and root's, and its hash was checked
/// at install, so what is read here is what was signed.
extension InstalledApp {
    public func installedInfo(in root: StateRoot) -> [String: Any]? {
        guard let bundle = bundlePath(in: root) else { return nil }
        let plist = layout == "macos" ? "\(bundle)/Contents/Info.plist" : "\(bundle)/Info.plist"
        guard let data = FileManager.default.contents(atPath: plist) else { return nil }
        return try? PropertyListSerialization.propertyList(from: data, format: nil)
            as? [String: Any]
    }

    /// A boolean key: YES as a boolean, or the strings YES, true or 1 that older plists carry.
    public static func infoFlag(_ value: Any?) -> Bool {
        switch value {
        case let flag as Bool: flag
        case let text as String: ["yes", "true", "1"].contains(text.lowercased())
        default: false
        }
    }

    /// `UIFileSharingEnabled` = YES: its Documents are shared with the computer (`appctl files`).
    public func fileSharingEnabled(in root: StateRoot) -> Bool {
        Self.infoFlag(installedInfo(in: root)?[FileSharing.infoKey])
    }
}

extension InstalledApp {
    /// `CFBundleURLTypes` and `CFBundleDocumentTypes` of the installed (signed, checked at
    /// install against its signer's policy) Info.plist; none when it cannot be read.
    public func handlers(in root: StateRoot) -> BundleHandlers {
        installedInfo(in: root).flatMap(BundleHandlers.read(foundation:)) ?? BundleHandlers()
    }
}
