import AppContainers
import AppdBase
import AppdConfig
import Foundation

/// The part of the app registry the Supervisor reads and writes: the installed apps, what a
/// launch reads of their Info.plist, their tmp and Caches, when each was last launched, the
/// state root's free space. The daemon's is its `AppStore`; SupervisorTests' fake holds a few
/// apps in memory.
public protocol AppCatalog: Sendable {
    func app(_ id: String) throws -> InstalledApp
    func apps() throws -> [InstalledApp]
    /// The launch-time check of the installed bundle (a fingerprint of its container, or its
    /// hash): a throw refuses the launch.
    func checkInstalledBundle(_ app: InstalledApp) throws
    /// What the lifecycle reads of the installed bundle's Info.plist (docs/info-plist.md).
    func launchInfo(of app: InstalledApp) -> AppLaunchInfo
    func temporaryDirectoryHasEntries(of app: InstalledApp) throws -> Bool
    /// Empties the app's tmp; how many entries it removed.
    func emptyTemporaryDirectory(of app: InstalledApp) throws -> Int
    func emptyCaches(of app: InstalledApp) throws -> AppStore.CachesReclaimed
    func recordLaunch(of bundleID: String, at time: Date) throws
    /// Each launched app's last launch.
    func lastLaunches() throws -> [AppID: Date]
    func freeSpace() -> FreeSpace?
}

/// `UIBackgroundModes` (the caller keeps those the lifecycle settings allow) and
/// `LSBackgroundOnly` (a service).
public struct AppLaunchInfo: Sendable, Equatable {
    public var backgroundModes: [String]
    public var backgroundOnly: Bool

    public init(backgroundModes: [String] = [], backgroundOnly: Bool = false) {
        self.backgroundModes = backgroundModes
        self.backgroundOnly = backgroundOnly
    }
}

extension AppStore: AppCatalog {
    /// `LSBackgroundOnly` is YES as a boolean, or the strings YES, true or 1 that older plists
    /// carry.
    public func launchInfo(of app: InstalledApp) -> AppLaunchInfo {
        guard let info = app.installedInfo(in: root) else { return AppLaunchInfo() }
        return AppLaunchInfo(
            backgroundModes: info["UIBackgroundModes"] as? [String] ?? [],
            backgroundOnly: InstalledApp.infoFlag(info["LSBackgroundOnly"]))
    }
}
