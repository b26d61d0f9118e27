import Sandbox

/// An app container's `/tmp` (issue 37): programs and libraries that write `/tmp` by name
/// (not `$TMPDIR`) fail in a sandbox that has none. It is a link to the data container's
/// `tmp`, which the app already writes (and cannot execute from: the data container is
/// mounted noexec): no new writable place, the same quota, gone with the data container.
enum AppTmp {
    /// `dataContainer`: where the sandbox shows it (`/appd/data`, AppPaths). Not made when
    /// anything the sandbox mounts lies at or below `/tmp` (its mount point is made there).
    static func link(in profile: inout SandboxProfile, dataContainer: String) {
        guard
            !profile.mounts.contains(where: {
                $0.destination == "/tmp" || $0.destination.hasPrefix("/tmp/")
            })
        else { return }
        profile.mounts.append(.symlink("\(dataContainer)/tmp", at: "/tmp"))
    }
}
