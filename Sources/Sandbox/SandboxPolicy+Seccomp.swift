import Glibc

/// The seccomp deny list. It covers at least what Flatpak and Docker's default profile refuse
/// (docs/sandbox.md): the filter allows by default and refuses these, and kills any call made through
/// a foreign ABI (i386 `int 0x80`, x32), where every number means something else.
extension SandboxPolicy {
    static func deny(_ names: [String], _ errno: Int32 = EPERM, _ reason: String) -> [SeccompRule] {
        names.map {
            SeccompRule(syscall: $0, action: .errno(errno), conditions: [], reason: reason)
        }
    }

    static let namespaceFlags: [(String, UInt64)] = [
        ("CLONE_NEWNS", 0x0002_0000), ("CLONE_NEWCGROUP", 0x0200_0000),
        ("CLONE_NEWUTS", 0x0400_0000), ("CLONE_NEWIPC", 0x0800_0000),
        ("CLONE_NEWUSER", 0x1000_0000), ("CLONE_NEWPID", 0x2000_0000),
        ("CLONE_NEWNET", 0x4000_0000), ("CLONE_NEWTIME", 0x0000_0080),
    ]

    /// Address families an app may open: unix, IPv4, IPv6 and (route-only) netlink.
    static let allowedFamilies: Set<UInt64> = [1, 2, 10, 16]
    /// AF_MAX on Linux 6.x; anything at or above it is refused outright.
    static let familyLimit: UInt64 = 46

    static let baselineSeccomp: [SeccompRule] = {
        var rules: [SeccompRule] = []
        rules += deny(
            ["clone3"], ENOSYS,
            "clone3 passes its flags in memory a filter cannot read; ENOSYS makes libc fall back to clone"
        )
        for (name, bit) in namespaceFlags {
            rules.append(
                SeccompRule(
                    syscall: "clone", action: .errno(EPERM),
                    conditions: [.arg(0, hasBits: bit)], reason: "no new namespaces (\(name))"))
        }
        rules += deny(["unshare", "setns"], EPERM, "no new or foreign namespaces")
        rules += deny(
            [
                "mount", "umount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
                "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
            ],
            EPERM, "the app's view of the filesystem is fixed")
        rules += deny(["perf_event_open"], EPERM, "performance counters expose the host")
        rules += deny(["bpf"], EPERM, "no eBPF programs")
        rules += deny(["userfaultfd"], EPERM, "a favourite tool for kernel exploits")
        rules += deny(
            ["io_uring_setup", "io_uring_enter", "io_uring_register"], EPERM,
            "io_uring bypasses seccomp for the operations it performs")
        rules += deny(
            ["keyctl", "add_key", "request_key"], EPERM, "the kernel keyring is not namespaced")
        rules += deny(["kexec_load", "kexec_file_load", "reboot"], EPERM, "host power and kernel")
        rules += deny(
            [
                "init_module", "finit_module", "delete_module", "create_module",
                "query_module", "get_kernel_syms",
            ], EPERM, "kernel modules")
        rules += deny(
            ["acct", "swapon", "swapoff", "quotactl", "quotactl_fd", "nfsservctl"],
            EPERM, "host administration")
        rules += deny(["syslog"], EPERM, "the kernel log")
        rules += deny(
            ["lookup_dcookie", "open_by_handle_at", "name_to_handle_at", "fanotify_init"],
            EPERM, "bypasses path-based confinement")
        rules += deny(
            ["iopl", "ioperm", "vhangup", "uselib", "_sysctl", "sysfs", "ustat"], EPERM,
            "obsolete or hardware access")
        rules += deny(
            [
                "settimeofday", "clock_settime", "clock_adjtime", "sethostname",
                "setdomainname",
            ], EPERM, "host clock and names")
        // personality(0xffffffff) only reads the persona; PER_LINUX (0) changes nothing. Any
        // other value would change how the kernel treats the process (READ_IMPLIES_EXEC,
        // ADDR_NO_RANDOMIZE ...).
        rules.append(
            SeccompRule(
                syscall: "personality", action: .log,
                conditions: [.arg(0, .equal, 0xFFFF_FFFF)], reason: "reading the persona is allowed"
            ))
        rules.append(
            SeccompRule(
                syscall: "personality", action: .errno(EPERM),
                conditions: [.arg(0, .notEqual, 0)], reason: "no persona changes"))
        for (name, request) in [("TIOCSTI", UInt32(0x5412)), ("TIOCLINUX", 0x541C)] {
            rules.append(
                SeccompRule(
                    syscall: "ioctl", action: .errno(EPERM),
                    conditions: [.arg(1, low32: request)],
                    reason: "\(name) can type into the terminal (compared on the low 32 bits)"))
        }
        // With dev.tty.ldisc_autoload=1 (Debian's default) a line discipline set on the app's
        // own terminal loads its kernel module: the app would pick host kernel code to load
        // (n_hdlc, n_gsm and the like have had their share of bugs).
        rules.append(
            SeccompRule(
                syscall: "ioctl", action: .errno(EPERM), conditions: [.arg(1, low32: 0x5423)],
                reason: "TIOCSETD loads line discipline modules (compared on the low 32 bits)"))
        // The data container's disk quota is a project quota (DataQuota): an app owning its
        // files could otherwise move them to another project (FS_IOC_FSSETXATTR) or clear the
        // inherit flag on its directories (either ioctl) so new files escape the limit.
        for (name, request) in [
            ("FS_IOC_SETFLAGS", UInt32(0x4008_6602)), ("FS_IOC32_SETFLAGS", 0x4004_6602),
            ("FS_IOC_FSSETXATTR", 0x401C_5820),
        ] {
            rules.append(
                SeccompRule(
                    syscall: "ioctl", action: .errno(EPERM),
                    conditions: [.arg(1, low32: request)],
                    reason: "\(name) could move files out of the data container's project quota"))
        }
        for family in 0..<familyLimit where !allowedFamilies.contains(family) {
            rules.append(
                SeccompRule(
                    syscall: "socket", action: .errno(EAFNOSUPPORT),
                    conditions: [.arg(0, .equal, family)],
                    reason: "address family \(family): only unix, inet, inet6 and netlink-route"))
        }
        rules.append(
            SeccompRule(
                syscall: "socket", action: .errno(EAFNOSUPPORT),
                conditions: [.arg(0, .greaterOrEqual, familyLimit)],
                reason: "unknown address families"))
        rules.append(
            SeccompRule(
                syscall: "socket", action: .errno(EPERM),
                conditions: [.arg(0, .equal, 16), .arg(2, .notEqual, 0)],
                reason: "netlink other than NETLINK_ROUTE (audit, uevents, netfilter ...)"))
        return rules
    }()

    static let noWritableExecutableMemory: [SeccompRule] = {
        let writeExec: UInt64 = 0x2 | 0x4  // PROT_WRITE | PROT_EXEC
        let exec: UInt64 = 0x4
        let shared: UInt64 = 0x1  // MAP_SHARED, and MAP_SHARED_VALIDATE (0x3)
        let why = "no writable+executable memory without cs.allow-jit"
        return ["mmap", "mprotect", "pkey_mprotect"].map {
            SeccompRule(
                syscall: $0, action: .errno(EACCES),
                conditions: [.arg(2, hasBits: writeExec)], reason: why)
        } + [
            SeccompRule(
                syscall: "shmat", action: .errno(EACCES),
                conditions: [.arg(2, hasBits: 0o100000)], reason: why + " (SHM_EXEC)"),
            // A shared mapping can be aliased writable (mremap of size 0, fork, a second mmap
            // of the same object), and MDWE looks at one mapping at a time. The dynamic loader
            // maps code MAP_PRIVATE.
            SeccompRule(
                syscall: "mmap", action: .errno(EACCES),
                conditions: [.arg(2, hasBits: exec), .arg(3, hasBits: shared)],
                reason:
                    "no shared executable mappings without cs.allow-jit (a writable alias of code)"),
            // A memfd lives on the kernel's internal shm mount, which no noexec reaches: written
            // through one mapping or write(), it could be mapped executable through another
            // (MAP_PRIVATE shows the file's pages until written) or exec'd. Libraries that use
            // memfds for shared buffers fall back to /dev/shm (noexec) when it fails.
            SeccompRule(
                syscall: "memfd_create", action: .errno(EPERM), conditions: [],
                reason:
                    "a memfd can be written and then mapped executable or exec'd: no memfds without cs.allow-jit"
            ),
        ]
    }()

    /// Where the kernel has no PR_SET_MDWE (before 6.3): seccomp cannot tell whether a mapping
    /// was writable, so it refuses every request to make one executable.
    static let noExecGain: [SeccompRule] = ["mprotect", "pkey_mprotect"].map {
        SeccompRule(
            syscall: $0, action: .errno(EACCES), conditions: [.arg(2, hasBits: 0x4)],
            reason:
                "no PR_SET_MDWE on this kernel: no mapping becomes executable (PROT_EXEC) without cs.allow-jit"
        )
    }

    static let noPtrace = deny(
        ["ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp"], EPERM,
        "no debugging of other processes without cs.debugger")
}
