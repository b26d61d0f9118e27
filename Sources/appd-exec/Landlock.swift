import CLinux
import Glibc

/// The Landlock domain of the app: filesystem rules from `landlock-fs`, TCP port rules from
/// `landlock-net*`, scoping from `landlock-scope`. Applied in the app process after
/// no_new_privs, before seccomp. Rights the kernel's ABI does not have are left out of both the
/// handled and the allowed masks; a record that cannot be honoured at all is an error, never
/// silently weakened.
enum Landlock {
    static func apply(_ profile: Profile) throws {
        let wantsFilesystem = !profile.landlockPaths.isEmpty
        let wantsNetwork = !profile.landlockNetRestrict.isEmpty
        let wantsScopes = !profile.landlockScopes.isEmpty
        let wantsAny = wantsFilesystem || wantsNetwork || wantsScopes
        let minimum = profile.landlockMinABI ?? (wantsAny ? 1 : 0)

        let reported = appd_landlock_abi()
        let abi = reported < 0 ? 0 : Int(reported)
        if abi < minimum {
            let why =
                reported < 0 ? " (\(errnoName(errno)): Landlock not built in or disabled)" : ""
            throw LaunchFailure(
                "landlock",
                "kernel Landlock ABI \(abi) is below the profile's minimum \(minimum)\(why);"
                    + " hint: boot with lsm=...,landlock or use a newer kernel")
        }
        guard wantsAny && abi > 0 else { return }
        if wantsNetwork && abi < 4 {
            throw LaunchFailure("landlock", "TCP rules need Landlock ABI 4, the kernel has \(abi)")
        }
        if wantsScopes && abi < 6 {
            throw LaunchFailure("landlock", "scoping needs Landlock ABI 6, the kernel has \(abi)")
        }

        let handledFilesystem = wantsFilesystem ? filesystemRights(abi: abi) : 0
        var handledNetwork: UInt64 = 0
        for right in profile.landlockNetRestrict { handledNetwork |= networkRight(right) }
        var scoped: UInt64 = 0
        for scope in profile.landlockScopes {
            switch scope {
            case .abstractUnix: scoped |= APPD_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
            case .signal: scoped |= APPD_LANDLOCK_SCOPE_SIGNAL
            }
        }

        let ruleset = appd_landlock_create_ruleset(
            handledFilesystem, handledNetwork, scoped, Int32(abi))
        try sys(ruleset, "landlock", "cannot create a ruleset (ABI \(abi))")
        defer { close(ruleset) }

        for (access, path) in profile.landlockPaths {
            try addPathRule(ruleset, path: path, access: access, handled: handledFilesystem)
        }
        for (right, port) in profile.landlockPorts {
            // A port of an unrestricted kind is allowed anyway; the kernel refuses rules for
            // rights the ruleset does not handle.
            let bit = networkRight(right)
            guard handledNetwork & bit != 0 else { continue }
            try sys(
                appd_landlock_add_port_rule(ruleset, port, bit), "landlock",
                "cannot allow TCP \(right.rawValue) on port \(port)")
        }
        // From ABI 7 the kernel audits the domain's denials; asked to (`log-denials`), also
        // after the execve of the app (the daemon's denial log reads them, docs/denials.md).
        let flags: UInt32 =
            abi >= 7 && profile.logDenials ? APPD_LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON : 0
        try sys(appd_landlock_restrict_self(ruleset, flags), "landlock", "cannot restrict self")
    }

    /// Every filesystem right the kernel's ABI knows.
    static func filesystemRights(abi: Int) -> UInt64 {
        var rights: UInt64 = (1 << 13) - 1  // ABI 1: EXECUTE ... MAKE_SYM
        if abi >= 2 { rights |= APPD_LANDLOCK_ACCESS_FS_REFER }
        if abi >= 3 { rights |= APPD_LANDLOCK_ACCESS_FS_TRUNCATE }
        if abi >= 5 { rights |= APPD_LANDLOCK_ACCESS_FS_IOCTL_DEV }
        return rights
    }

    /// The rights that mean something on a file rather than a directory; the kernel refuses
    /// the others in a rule on a file.
    static let fileRights: UInt64 =
        APPD_LANDLOCK_ACCESS_FS_EXECUTE | APPD_LANDLOCK_ACCESS_FS_WRITE_FILE
        | APPD_LANDLOCK_ACCESS_FS_READ_FILE | APPD_LANDLOCK_ACCESS_FS_TRUNCATE
        | APPD_LANDLOCK_ACCESS_FS_IOCTL_DEV

    /// `ro` reads files and lists directories, `rx` also executes, `rw` is every right but
    /// execute (write, create, remove, rename, truncate, device ioctls), `rwx` everything.
    static func rights(_ access: FilesystemAccess, handled: UInt64) -> UInt64 {
        let read = APPD_LANDLOCK_ACCESS_FS_READ_FILE | APPD_LANDLOCK_ACCESS_FS_READ_DIR
        let execute = APPD_LANDLOCK_ACCESS_FS_EXECUTE
        switch access {
        case .ro: return read & handled
        case .rx: return (read | execute) & handled
        case .rw: return handled & ~execute
        case .rwx: return handled
        }
    }

    private static func addPathRule(
        _ ruleset: Int32, path: String, access: FilesystemAccess, handled: UInt64
    ) throws {
        let fd = appd_open_path(path)
        if fd < 0 {
            // A rule for a path that is not there allows nothing: leaving it out is stricter,
            // never weaker.
            if errno == ENOENT { return }
            throw LaunchFailure.system("landlock", "cannot open \(path)")
        }
        defer { close(fd) }
        var status = stat()
        try sys(fstat(fd, &status), "landlock", "cannot stat \(path)")
        var allowed = rights(access, handled: handled)
        if status.st_mode & S_IFMT != S_IFDIR { allowed &= fileRights }
        guard allowed != 0 else { return }
        try sys(
            appd_landlock_add_path_rule(ruleset, fd, allowed), "landlock",
            "cannot allow \(access.rawValue) beneath \(path)")
    }

    private static func networkRight(_ right: NetworkRight) -> UInt64 {
        switch right {
        case .bind: APPD_LANDLOCK_ACCESS_NET_BIND_TCP
        case .connect: APPD_LANDLOCK_ACCESS_NET_CONNECT_TCP
        }
    }
}
