import AppdBase
import Foundation
import Glibc

/// A change to one app's `[App ID]` section, as `appd override` asks it: values to set, each
/// with the option that gave it (errors name the option), entitlements to deny and to allow
/// again, or the whole section reset. It only ever takes away: `allow` removes a deny, never
/// grants what the signer did not.
public struct AppOverrideEdit: Sendable {
    /// In the order they apply; a value `default` unsets the key (the host's value applies).
    public var values: [(key: String, option: String, value: String)] = []
    /// Entitlement keys or patterns (exact, a prefix ending in `*`, or `*`) to revoke.
    public var deny: [String] = []
    /// Revoked entitlements to give back.
    public var allow: [String] = []
    /// Remove the whole section.
    public var reset = false

    public init() {}

    /// `old` with this edit applied, each value checked, and the warnings
    /// (an `allow` that had nothing to remove).
    public func applied(to old: AppOverride) throws
        -> (override: AppOverride, warnings: [String])
    {
        if reset { return (AppOverride(), []) }
        var new = old
        var warnings: [String] = []
        for (key, option, value) in values {
            if value == "default" {
                new.unset(key: key)
                continue
            }
            guard ConfigKey.find(key, in: .app) != nil else {
                throw AppdError(.conflict, "\(key) is not a key of [App ID]")
            }
            do throws(ConfigProblem) {
                try new.set(key: key, value: value)
            } catch .notA(let expected) {
                throw AppdError(
                    .invalidConfig, "\(option) \(value.isEmpty ? "''" : value) is not \(expected)")
            } catch .says(let sentence) {
                throw AppdError(.invalidConfig, "\(option) \(value): \(sentence)")
            }
        }
        for entitlement in deny where !new.revokedEntitlements.contains(entitlement) {
            guard ConfigText.patterns(entitlement) == [entitlement] else {
                throw AppdError(
                    .invalidConfig,
                    "--deny \(entitlement) is not an entitlement key or pattern (exact, a prefix ending in *, or *)"
                )
            }
            new.revokedEntitlements.append(entitlement)
        }
        for entitlement in allow {
            if let index = new.revokedEntitlements.firstIndex(of: entitlement) {
                new.revokedEntitlements.remove(at: index)
            } else if let pattern = new.revokedEntitlements.first(where: {
                EntitlementPattern.matches($0, entitlement, ignoringCase: false)
            }) {
                throw AppdError(
                    .invalidConfig,
                    "--allow \(entitlement): it is denied by the pattern '\(pattern)'",
                    hint:
                        "remove the pattern with --allow '\(pattern)', then deny what should stay denied"
                )
            } else {
                warnings.append(
                    "\(entitlement) was not denied: --allow only removes a --deny, it never grants what the signer did not"
                )
            }
        }
        return (new, warnings)
    }
}

extension AppOverride {
    /// What differs between two sections, key by key in the order of `keys`, as `appd
    /// override` reports it: `MemoryMax=1G (was 512M)`, `CPUWeight removed (was 50; …)`.
    public static func changes(from old: AppOverride, to new: AppOverride) -> [String] {
        // An empty value (BackgroundModes=) reads as "(none)".
        func settings(_ override: AppOverride) -> [String: String] {
            Dictionary(
                override.lines.map { ($0.key, $0.value.isEmpty ? "(none)" : $0.value) },
                uniquingKeysWith: { $1 })
        }
        let before = settings(old)
        let after = settings(new)
        var changes: [String] = []
        for key in keys {
            switch (before[key], after[key]) {
            case (nil, let value?): changes.append("\(key)=\(value)")
            case (let was?, let value?) where was != value:
                changes.append("\(key)=\(value) (was \(was))")
            case (let was?, nil):
                changes.append("\(key) removed (was \(was); the host's value applies)")
            default: break
            }
        }
        return changes
    }
}

extension AppdConfiguration {
    /// The admin's file as `appd override` edits it: its text and what it says. A missing file
    /// reads as empty unless it was named explicitly; a file with an error is refused, so that
    /// an edit never rewrites what appd cannot read.
    public static func readForEditing(_ path: String, explicit: Bool) throws
        -> (text: String, config: AppdConfiguration)
    {
        let exists = FileManager.default.fileExists(atPath: path)
        if !exists && explicit {
            throw AppdError(.invalidConfig, "config file \(path) does not exist")
        }
        var text = ""
        if exists {
            guard let data = FileManager.default.contents(atPath: path),
                let decoded = String(data: data, encoding: .utf8)
            else {
                throw AppdError(.invalidConfig, "config file \(path) is unreadable or not UTF-8")
            }
            text = decoded
        }
        do {
            return (text, try AppdConfiguration.parse(text, file: path))
        } catch let error as AppdError {
            throw AppdError(
                .invalidConfig, "\(path) has an error, so it is left as it is: \(error.message)",
                hint: error.hint ?? "fix the file first")
        }
    }

    /// Writes `new` as the `[App id]` section of the file `path` (read as `text`, saying
    /// `config`), atomically, after checking the edited text reads back as exactly that section
    /// with everything else unchanged. Call it inside `withEditLock(path)`.
    public static func writeOverride(
        _ id: String, _ new: AppOverride, text: String, config: AppdConfiguration, path: String
    ) throws {
        if geteuid() != 0, access(path, W_OK) != 0 {
            throw AppdError(
                .permissionDenied, "changing \(path) needs root", hint: "run it with sudo")
        }
        let edited = replacingApp(id, with: new.lines, in: text)
        let check = try parse(edited, file: path)
        var expected = config
        expected.apps[AppID(id)] = new.lines.isEmpty ? nil : new
        guard check == expected else {
            throw AppdError(
                .conflict, "the edited \(path) would not say what was asked; it is left as it is")
        }
        try writeAtomically(edited, to: path)
    }
}
