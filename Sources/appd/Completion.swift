import AppContainers
import AppdClient
import AppdConfig
import Foundation

/// Installed bundle ids for appd's shell completion: from the daemon the command line names
/// (as appctl's), else — the daemon stopped, or its socket closed to this user — from the
/// state root's registry read in place, which root (who runs appd's in-process commands) can
/// always do. Nothing, never an error, when neither answers.
enum InstalledAppIDs {
    static func complete(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
        let fromDaemon = ShellCompletion.appIDs(words, index, prefix)
        if !fromDaemon.isEmpty { return fromDaemon }
        let environment = ProcessInfo.processInfo.environment
        let root =
            value(of: "--root", in: words)
            ?? environment["APPD_ROOT"].flatMap { $0.isEmpty ? nil : $0 }
            ?? AppdConfiguration.defaultRoot
        guard
            let store = try? AppStore(
                root: StateRoot(path: root), config: AppdConfiguration(), access: .readOnly),
            let apps = try? store.apps()
        else { return [] }
        return apps.map(\.bundleID)
            .filter { $0.lowercased().hasPrefix(prefix.lowercased()) }.sorted()
    }

    static func value(of name: String, in words: [String]) -> String? {
        for (index, word) in words.enumerated() {
            if word == name, index + 1 < words.count { return words[index + 1] }
            if word.hasPrefix(name + "=") { return String(word.dropFirst(name.count + 1)) }
        }
        return nil
    }
}
