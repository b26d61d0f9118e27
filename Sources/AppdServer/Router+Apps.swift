import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import Foundation

extension Router {
    func listApps() async throws -> Reply {
        let data = try appList.data {
            var data = try APICoding.encoder().encode(
                try store.apps().map { APIApp($0, root: store.root, withEntitlements: false) })
            data.append(0x0A)
            return data
        }
        return .json(status: 200, data)
    }

    func appInfo(_ id: String) async throws -> Reply {
        let app = try store.app(id)
        let running = await supervisor.runningCount(app: app.appID)
        var info = APIApp(app, root: store.root, withEntitlements: true, running: running)
        info.denials = supervisor.denials.perAppCounts()[app.appID] ?? 0
        info.adminOverride = APIApp.adminOverride(configuration.current.override(for: app.bundleID))
        info.service = await supervisor.service(app.appID)
        info.storage = await Self.measureStorage(of: app, in: store)
        return try .json(info)
    }

    /// The walk runs on a queue of its own, not on the pool the requests share: it takes up to
    /// a second (StorageWalkLimits.standard), and two at once must not hold every thread of a
    /// two-core host. One at a time, so a burst of requests queues here rather than fills the
    /// disk with walks.
    static let storageQueue = DispatchQueue(label: "appd.router.storage")

    static func measureStorage(of app: InstalledApp, in store: AppStore) async -> APIStorage {
        await withCheckedContinuation { continuation in
            storageQueue.async {
                continuation.resume(returning: APIStorage(store.storageUsage(of: app)))
            }
        }
    }

    func install(_ request: Request) async throws -> Reply {
        let began = ContinuousClock.now
        var result: InstallResult
        do {
            result = try await installer.install(request)
        } catch {
            metrics.recordInstall(ContinuousClock.now - began, succeeded: false)
            throw error
        }
        metrics.recordInstall(ContinuousClock.now - began, succeeded: true)
        var laps = Laps()
        appList.invalidate()
        let app = APIApp(result.app, root: store.root, withEntitlements: true)
        supervisor.publishAppEvent(
            .installed, app: result.app.bundleID, version: result.app.version)
        await supervisor.appInstalled(result.app)
        supervisor.reclaimCachesIfLow()
        result.timings.record = laps.lap()
        return try .json(
            APIInstallResult(
                app: app, previousVersion: result.previousVersion, reusedData: result.reusedData,
                warnings: result.warnings),
            status: 201, headers: [("Server-Timing", result.timings.serverTiming)])
    }

    func uninstall(_ id: String, _ request: Request) async throws -> Reply {
        let keepData = request.flag("keepData")
        let result = try await supervisor.whileNotRunning(AppID(id)) { [store, installer] in
            try await installer.onQueue { try store.uninstall(id, keepData: keepData) }
        }
        appList.invalidate()
        installer.logQuarantined(result.recovery)
        supervisor.publishAppEvent(
            .uninstalled, app: result.app.bundleID, version: result.app.version)
        return try .json(
            APIUninstallResult(
                app: APIApp(result.app, root: store.root, withEntitlements: false),
                keptData: result.keptData))
    }

    func container(_ id: String, kind: String, group: String?) async throws -> Reply {
        let app = try store.app(id)
        switch kind {
        case "data":
            return try .json(APIContainer(kind: kind, path: app.dataContainer(in: store.root)))
        case "bundle":
            guard let path = app.bundlePath(in: store.root) else {
                throw AppdError(
                    .notFound, "\(app.bundleID) has no bundle (uninstalled with --keep-data)")
            }
            return try .json(APIContainer(kind: kind, path: path))
        case "group":
            guard let group else {
                throw AppdError(
                    .badRequest,
                    "a group container needs the group id: containers/group/{group}")
            }
            let requested = try app.decodedEntitlements().strings(
                EntitlementCatalog.applicationGroups)
            guard
                let match = requested.first(where: {
                    $0.caseInsensitiveCompare(group) == .orderedSame
                })
            else {
                throw AppdError(
                    .notFound, "\(app.bundleID) is not in application group '\(group.prefix(200))'",
                    hint: requested.isEmpty
                        ? "it requests no application groups"
                        : "its groups: \(requested.joined(separator: ", "))")
            }
            // A read: containers are made at install, never here (no lock, no write).
            let containers = try store.groupContainers(for: app)
            guard
                let container = containers.first(where: {
                    $0.groupID.caseInsensitiveCompare(match) == .orderedSame
                })
            else {
                throw AppdError(
                    .notFound, "\(app.bundleID) has no container for group '\(match)'",
                    hint:
                        "it is made when an app using the group is installed; 'appd doctor' reports a missing one"
                )
            }
            return try .json(
                APIContainer(kind: kind, path: container.path, group: container.groupID))
        default:
            throw AppdError(
                .badRequest,
                "unknown container kind '\(kind.prefix(50))': use data, bundle or group/{group}")
        }
    }
}
