import CLinux
import Glibc

/// The private net and uts namespaces: loopback up, the hostname set. PID 1 does this after the
/// mounts, before it forks the app.
enum Network {
    /// `loopback` and `hostname` of the profile, each unless it lives in a namespace the
    /// launch joined (the app's shared network and uts namespaces have them already).
    static func setUp(_ profile: Profile, joined: JoinedNamespaces? = nil) throws {
        if profile.loopback && (joined?.net ?? -1) < 0 { try bringUpLoopback() }
        if let hostname = profile.hostname, (joined?.uts ?? -1) < 0 { try setHostname(hostname) }
    }

    /// Foundation's run loop wakes itself through a UDP pair on 127.0.0.1 (measured on Linux):
    /// a new net namespace starts with `lo` down, so it must be brought up.
    static func bringUpLoopback() throws {
        try sys(appd_loopback_up(), "loopback", "cannot bring lo up")
    }

    static func setHostname(_ name: String) throws {
        let bytes = Array(name.utf8)
        try sys(sethostname(name, bytes.count), "hostname", "cannot set hostname '\(name)'")
    }
}
