import CLinux
import Glibc

/// A plain OCI container's process (docs/oci-runtime.md, "Plain containers"): root of a user
/// namespace of its own, whose ids 0..<count are an unprivileged range of the host's that no
/// one else uses. Inside, it holds exactly the config's credentials and capability sets, as
/// runc applies them; on the host it is that range, with no capability in the initial
/// namespace. The root, the namespaces and the mounts were made by the host's root before
/// (PID 1 and the launcher), so they belong to the initial user namespace: the container's
/// capabilities reach none of them.
enum UserNamespace {
    /// After the start gate, in place of the app's credential steps: rlimits (as the host's
    /// root, which may lower any and raise none past the hard limit without
    /// CAP_SYS_RESOURCE), the user namespace, the bounding set, Landlock and seccomp (while the
    /// namespace's root still holds CAP_SYS_ADMIN in it, so without no_new_privs), then the
    /// ids and the exact capability sets, no_new_privs unless `new-privileges`.
    static func confine(_ launch: Launch, map: UserNamespaceMap) throws {
        let profile = launch.profile
        try Credentials.applyResourceLimits(profile.rlimits)
        umask(0o022)
        try enter(map, existing: launch.idmapUserNamespace)
        let caps = profile.capabilities ?? CapabilityMasks()
        for cap in 0...launch.lastCapability where caps.bounding & (1 << UInt64(cap)) == 0 {
            try sys(appd_capbset_drop(cap), "caps", "cannot drop capability \(cap)")
        }
        try sys(appd_cap_ambient_clear_all(), "caps", "cannot clear the ambient set")
        if profile.refuseExecGain {
            try sys(appd_set_mdwe_refuse_exec_gain(), "mdwe", "cannot set PR_SET_MDWE")
        }
        try Landlock.apply(profile)
        try launch.seccomp.install(logDenials: profile.logDenials)

        let groups = profile.groups ?? []
        _ = try groups.withUnsafeBufferPointer { buffer in
            try sys(setgroups(buffer.count, buffer.baseAddress), "setgroups", "\(groups)")
        }
        let gid = profile.gid ?? 0
        let uid = profile.uid ?? 0
        try sys(appd_setresgid(gid), "setresgid", "gid \(gid)")
        try sys(appd_set_keepcaps(1), "caps", "cannot keep capabilities")
        try sys(appd_setresuid(uid), "setresuid", "uid \(uid)")
        try sys(
            appd_capset_masks(caps.effective, caps.permitted, caps.inheritable), "caps",
            "cannot set the capability sets")
        for cap in 0...launch.lastCapability where caps.ambient & (1 << UInt64(cap)) != 0 {
            try sys(appd_cap_ambient_raise(cap), "caps", "cannot raise ambient capability \(cap)")
        }
        try sys(appd_set_keepcaps(0), "caps", "cannot reset keep-capabilities")
        if !profile.newPrivileges {
            try sys(appd_set_no_new_privs(), "no_new_privs", "cannot set no_new_privs")
        }
    }

    /// Joins the container's user namespace: ids 0..<count on the host's range, uids and gids.
    /// With an image root it is the one the outer launcher made for the root's idmapping
    /// (`existing`), so the mount and the process share one mapping; otherwise one is made the
    /// same way (`appd_mapping_userns`: a child unshares, this process writes its maps through
    /// the container's procfs). setgroups stays allowed: the maps were written from above.
    private static func enter(_ map: UserNamespaceMap, existing: Int32) throws {
        var namespace = existing
        if namespace < 0 {
            namespace = appd_mapping_userns(map.uid, map.gid, map.count)
            try sys(namespace, "userns", "cannot create the user namespace")
        }
        defer { close(namespace) }
        try sys(
            appd_setns(namespace, APPD_CLONE_NEWUSER), "userns", "cannot enter the user namespace")
    }
}
