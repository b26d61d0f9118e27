import AppdAPI

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// Apps as `appd list`/`appd info` have always printed them, from the API's types, so that
/// appd (through the daemon or not) and appctl print one way.
extension APIApp {
    /// `appd info`, `appctl info` and the body of `appd install`'s answer.
    public func printText() {
        Output.line("\(bundleId)  \(title ?? "")  \(versionText)")
        var rows: [(String, String)] = [("state", state), ("uid/gid", "\(uid)/\(gid)")]
        if let bundlePath { rows.append(("bundle", bundlePath)) }
        rows.append(("data", dataContainer))
        if let executable { rows.append(("executable", "\(executable) (\(layout ?? "?") layout)")) }
        if bundlePath != nil {
            rows.append(("signer", signer.map { "key \($0)" } ?? "none (installed unsigned)"))
        }
        if let fileCount, let totalBytes {
            rows.append(("files", "\(fileCount) (\(Output.bytes(totalBytes)))"))
        }
        if let storage { rows.append(("size", Self.storageText(storage))) }
        rows.append(("installed", TextFormatting.iso8601(installedAt)))
        rows.append(("updated", TextFormatting.iso8601(updatedAt)))
        if let adminOverride, !adminOverride.isEmpty {
            rows.append(("override", Self.overrideText(adminOverride)))
        }
        if let running, running > 0 {
            rows.append(("running", running == 1 ? "1 instance" : "\(running) instances"))
        }
        if let denials, denials > 0 {
            rows.append(("denials", "\(denials) (appctl denials \(bundleId))"))
        }
        if let service { rows.append(("service", Self.serviceText(service, now: Date()))) }
        if let urlSchemes {
            rows.append(("opens URLs", urlSchemes.map { $0 + ":" }.joined(separator: " ")))
        }
        for type in documentTypes ?? [] { rows.append(("opens", type.text)) }
        for (label, value) in rows {
            Output.line("  \(label.padded(toLength: 11)) \(value)")
        }
        entitlements?.printText(indent: "  ")
    }

    /// `app 1.2 MiB, Documents & Data 40 KiB, Caches 8 KiB, tmp 0 B`, each "at least" when
    /// the daemon's walk stopped at its bound.
    public static func storageText(_ storage: APIStorage) -> String {
        let text = [
            ("app", storage.appBytes), ("Documents & Data", storage.documentsAndDataBytes),
            ("Caches", storage.cachesBytes), ("tmp", storage.tmpBytes),
        ].map { "\($0.0) \(Output.bytes($0.1))" }.joined(separator: ", ")
        return storage.complete
            ? text : "at least: \(text) (stopped after \(storage.entries) entries)"
    }

    /// `waiting: restart 2 of 5 in 4s (RunAtLoad, KeepAlive=yes; last: signaled, signal 9 ...)`.
    public static func serviceText(_ service: APIService, now: Date) -> String {
        let how = ((service.runAtLoad ? ["RunAtLoad"] : []) + ["KeepAlive=\(service.keepAlive)"])
            .joined(separator: ", ")
        var text = service.state.rawValue
        switch service.state {
        case .running: text += " (\(service.instances.joined(separator: ", ")))"
        case .waiting:
            let delay =
                service.nextTry.map { Table.duration(max(0, $0.timeIntervalSince(now))) } ?? "?"
            text += ": restart \(service.restarts) of \(service.restartLimit) in \(delay)"
        case .crashLoop:
            text +=
                ": gave up after \(service.restarts) restarts in a row; 'appctl launch \(service.app)' starts it again"
        case .stopped: break
        }
        text += " (\(how)"
        if let exit = service.lastExit { text += "; last: \(exit)" }
        return text + ")"
    }

    /// `[App ID]` in a line, in the order appd.conf documents the keys.
    public static func overrideText(_ settings: [String: String]) -> String {
        let order = [
            "MemoryMax", "TasksMax", "OpenFilesMax", "DataQuota", "CPUWeight", "BackgroundModes",
            "RevokeEntitlements", "RunAtLoad", "KeepAlive", "Arguments", "Environment",
        ]
        let keys =
            order.filter { settings[$0] != nil }
            + settings.keys.filter { !order.contains($0) }.sorted()
        return keys.map { key in
            let value = settings[key] ?? ""
            switch key {
            case "RevokeEntitlements": return "revoked " + value
            case "BackgroundModes" where value.isEmpty: return "BackgroundModes=none"
            default: return "\(key)=\(value)"
            }
        }.joined(separator: ", ") + " ([App] in appd.conf)"
    }

    /// `appd list`, `appctl list`: one row per app.
    public static func printTable(_ apps: [APIApp]) {
        Table.print(
            [["BUNDLE ID", "NAME", "VERSION", "STATE", "UID"]]
                + apps.map {
                    [$0.bundleId, $0.title ?? "-", $0.versionText, $0.state, "\($0.uid)"]
                })
    }
}

extension APIEntitlements {
    /// Every requested key, its value, and what it does here. Requested is not granted: `appd
    /// profile` shows what the sandbox allows. Keys and values are the bundle's, unknown ones
    /// too: each line goes through `Output.line`.
    public func printText(indent: String) {
        guard !requested.isEmpty else {
            Output.line("\(indent)entitlements: none requested")
            return
        }
        Output.line("\(indent)entitlements requested:")
        for entry in requested {
            Output.line("\(indent)  \(entry.key) = \(entry.value)")
            switch entry.status {
            case "linux": Output.line("\(indent)      \(entry.effect ?? "")")
            case "no-linux-effect":
                Output.line("\(indent)      no Linux effect (\(entry.effect ?? "-"))")
            default: Output.line("\(indent)      unknown to appd: kept, has no effect")
            }
        }
    }
}
