import AppBundle
import AppContainers
import AppdAPI
import AppdBase

/// `appd defaults` (docs/lifecycle.md, "Preferences"): an app's own preferences domain, read and written by
/// the daemon. The file work is `AppPreferences`' (AppContainers/AppPreferences.swift: openat2
/// beneath the data container, no link followed, size-capped, written atomically as the app's
/// uid), on the files queue; then the Supervisor tells the app's running instances.
extension Router {
    func appPreferences(_ id: String) async throws -> AppPreferences {
        let app = try store.app(id)
        let root = store.root
        return try await Self.onFilesQueue { try AppPreferences(app: app, root: root) }
    }

    /// `GET /v1/apps/{id}/defaults`
    func readDefaults(_ id: String) async throws -> Reply {
        let preferences = try await appPreferences(id)
        let values = try await Self.onFilesQueue { try preferences.read() }
        return try .json(
            APIDefaults(
                app: preferences.app.bundleID, values: values.mapValues(APIPlistValue.init)))
    }

    /// `POST /v1/apps/{id}/defaults`: `set` and `delete` in one write (`replace`: the domain is
    /// `set` alone).
    func changeDefaults(_ id: String, _ request: Request) async throws -> Reply {
        let change = try await request.decode(APIDefaultsChange.self, limit: maxRequestBytes)
        let set = try (change.set ?? [:]).mapValues { try $0.plistValue() }
        guard !set.isEmpty || !(change.delete ?? []).isEmpty || change.replace == true else {
            throw AppdError(.badRequest, "a defaults change sets or deletes at least one key")
        }
        if let empty = set.keys.first(where: \.isEmpty) ?? change.delete?.first(where: \.isEmpty) {
            throw AppdError(.badRequest, "a preferences key is never empty ('\(empty)')")
        }
        let preferences = try await appPreferences(id)
        let values = try await Self.onFilesQueue {
            var values = change.replace == true ? [:] : try preferences.read()
            for key in change.delete ?? [] { values[key] = nil }
            values.merge(set) { $1 }
            try preferences.write(values)
            return values
        }
        let told = await supervisor.defaultsDidChange(preferences.app.appID)
        return try .json(
            APIDefaultsResult(
                app: preferences.app.bundleID, values: values.mapValues(APIPlistValue.init),
                told: told))
    }
}
