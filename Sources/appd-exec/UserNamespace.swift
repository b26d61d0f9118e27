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
        try enter(map)
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

    /// unshare(CLONE_NEWUSER), the maps written by a child left in the parent namespace (a
    /// process cannot map ids other than its own into its own namespace): 0..<count onto the
    /// host's range, uids and gids. setgroups stays allowed: the writer holds CAP_SETGID above.
    private static func enter(_ map: UserNamespaceMap) throws {
        var go: (read: Int32, write: Int32) = (-1, -1)
        let piped = withUnsafeMutableBytes(of: &go) {
            appd_pipe_cloexec($0.baseAddress!.assumingMemoryBound(to: Int32.self))
        }
        try sys(piped, "userns", "cannot create a pipe")
        let parent = getpid()
        let writer = fork()
        try sys(writer, "userns", "cannot fork the map writer")
        if writer == 0 {
            close(go.write)
            var byte: UInt8 = 0
            var count: Int
            repeat { count = read(go.read, &byte, 1) } while count < 0 && errno == EINTR
            guard count == 1 else { _exit(2) }
            let uidLine = "0 \(map.uid) \(map.count)\n"
            let gidLine = "0 \(map.gid) \(map.count)\n"
            guard writeMap("/proc/\(parent)/uid_map", uidLine),
                writeMap("/proc/\(parent)/gid_map", gidLine)
            else { _exit(1) }
            _exit(0)
        }
        close(go.read)
        let unshared = appd_unshare(APPD_CLONE_NEWUSER)
        let code = errno
        _ = FileIO.writeAll(go.write, "g")
        close(go.write)
        var status: Int32 = 0
        while waitpid(writer, &status, 0) < 0 && errno == EINTR {}
        guard unshared == 0 else {
            throw LaunchFailure("userns", "cannot create the user namespace", errno: code)
        }
        guard status == 0 else {
            throw LaunchFailure("userns", "cannot write the user namespace's id maps")
        }
    }

    private static func writeMap(_ path: String, _ line: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return FileIO.writeAll(fd, line)
    }
}
