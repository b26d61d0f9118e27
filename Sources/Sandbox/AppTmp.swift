/// An app's `/tmp` (issues 37 and 38), under the daemon and under appd-oci alike: programs and
/// libraries that write `/tmp` by name (not `$TMPDIR`) fail in a sandbox that has none, and on
/// iOS an app's tmp is its own. It is a link to the data container's `tmp`, which the app
/// already writes (and cannot execute from: the data container is mounted noexec): no new
/// writable place, the same quota, gone with the data container.
///
/// A link, not a bind: the data container is the app's to change, and a bind's source would
/// be resolved by the launcher on the host, where a `tmp` the app replaced with a symlink
/// (`tmp -> /etc`) leads to the host's folder. The link is resolved by the app, in its own
/// mount namespace, where such a symlink leads only to what the sandbox shows it anyway; the
/// launcher never opens the app's `tmp`, and the link costs no mount.
public enum AppTmp {
    /// `dataContainer`: where the sandbox shows it (its own path under the daemon, `/appd/data`
    /// under appd-oci, AppPaths). Not made when anything the sandbox mounts lies at or below
    /// `/tmp` (its mount point is made there).
    public static func link(in profile: inout SandboxProfile, dataContainer: String) {
        guard
            !profile.mounts.contains(where: {
                $0.destination == "/tmp" || $0.destination.hasPrefix("/tmp/")
            })
        else { return }
        profile.mounts.append(.symlink("\(dataContainer)/tmp", at: "/tmp"))
    }
}
