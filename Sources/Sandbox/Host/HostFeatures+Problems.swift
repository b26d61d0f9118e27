import Glibc

extension HostFeatures {
    /// Every missing or limited feature, each naming the kernel option, sysctl or boot
    /// parameter that provides it. Empty on a kernel that offers everything.
    public var problems: [Problem] {
        var problems: [Problem] = []
        func missing(_ feature: String, _ message: String) {
            problems.append(Problem(feature: feature, severity: .missing, message: message))
        }
        func limited(_ feature: String, _ message: String) {
            problems.append(Problem(feature: feature, severity: .limited, message: message))
        }

        switch landlockStatus {
        case .notBuilt:
            missing(
                "landlock",
                "Landlock is not built into this kernel: build it with "
                    + "CONFIG_SECURITY_LANDLOCK=y (Linux 5.13 or later) and landlock in CONFIG_LSM")
        case .disabledAtBoot:
            missing(
                "landlock",
                "Landlock is not enabled: boot with lsm=...,landlock (the "
                    + "current list is in /sys/kernel/security/lsm) or build with landlock in "
                    + "CONFIG_LSM (CONFIG_SECURITY_LANDLOCK=y)")
        case .unknown:
            missing(
                "landlock",
                "the Landlock probe landlock_create_ruleset() failed: "
                    + "a seccomp filter around appd may refuse it")
        case .available:
            if landlockABI < 4 {
                limited(
                    "landlock",
                    "Landlock ABI \(landlockABI) cannot restrict TCP bind and "
                        + "connect: that needs ABI 4 (Linux 6.7); network-client apps launch "
                        + "with seccomp refusing listen() instead (they can bind a port >= 1024 "
                        + "but accept nothing; docs/sandbox-layers.md)")
            }
            if landlockABI < 6 {
                limited(
                    "landlock",
                    "Landlock ABI \(landlockABI) cannot scope abstract unix "
                        + "sockets and signals: that needs ABI 6 (Linux 6.12); apps on the host "
                        + "network launch with seccomp refusing unix sockets other than stream "
                        + "socketpairs instead, signals stay in their pid namespace "
                        + "(docs/sandbox-layers.md)")
            }
        }

        if !seccomp {
            missing(
                "seccomp",
                "seccomp is not available: build the kernel with "
                    + "CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y")
        } else if seccompActions.isEmpty {
            missing(
                "seccomp",
                "seccomp filters need CONFIG_SECCOMP_FILTER=y "
                    + "(/proc/sys/kernel/seccomp/actions_avail is missing)")
        } else if !seccompFilter {
            let absent = ["errno", "kill_process"].filter { !seccompActions.contains($0) }
            missing(
                "seccomp",
                "seccomp filters lack the actions \(absent.joined(separator: ", ")): "
                    + "SECCOMP_RET_KILL_PROCESS needs Linux 4.14")
        }

        if !namespaces.contains("user") {
            limited(
                "user namespace",
                "user namespaces are not built: CONFIG_USER_NS=y; apps "
                    + "run without one (uid mapping is not available)")
        } else if maxUserNamespaces == 0 {
            limited(
                "user namespace",
                "user namespaces are disabled by the sysctl "
                    + "user.max_user_namespaces=0: set it above 0 (e.g. 15000)")
        }
        if unprivilegedUserNamespaceClone == false {
            limited(
                "user namespace",
                "kernel.unprivileged_userns_clone=0: only root can "
                    + "create user namespaces (fine while appd runs as root)")
        }
        if appArmorRestrictsUserNamespaces == true {
            limited(
                "user namespace",
                "kernel.apparmor_restrict_unprivileged_userns=1: unprivileged user namespaces "
                    + "are confined by AppArmor (fine while appd runs as root)"
            )
        }
        let options = [
            "pid": "CONFIG_PID_NS=y", "net": "CONFIG_NET_NS=y", "mnt": "CONFIG_NAMESPACES=y",
            "ipc": "CONFIG_IPC_NS=y", "uts": "CONFIG_UTS_NS=y",
            "cgroup": "CONFIG_CGROUPS=y (Linux 4.6 or later)",
        ]
        for kind in Self.sandboxNamespaces where kind != "user" && !namespaces.contains(kind) {
            missing(
                "\(kind) namespace",
                "\(kind) namespaces are not available: build the kernel "
                    + "with \(options[kind] ?? "CONFIG_NAMESPACES=y")")
        }

        problems += cgroupProblems

        if !pidfd {
            limited(
                "pidfd",
                "pidfd_open needs Linux 5.3: appd falls back to waiting on pids, "
                    + "which a recycled pid can confuse")
        }
        return problems
    }

    private var cgroupProblems: [Problem] {
        var problems: [Problem] = []
        func add(_ severity: Problem.Severity, _ message: String) {
            problems.append(Problem(feature: "cgroups", severity: severity, message: message))
        }
        let kernelOption = [
            "memory": "CONFIG_MEMCG=y", "pids": "CONFIG_CGROUP_PIDS=y",
            "cpu": "CONFIG_CGROUP_SCHED=y and CONFIG_FAIR_GROUP_SCHED=y",
            "freezer": "CONFIG_CGROUP_FREEZER=y",
        ]
        switch cgroups.mode {
        case .none:
            add(
                .missing,
                "no cgroup filesystem is mounted: build with CONFIG_CGROUPS=y and "
                    + "mount cgroup2 on /sys/fs/cgroup")
            return problems
        case .unified:
            let own = cgroups.unified?.ownCgroup ?? "?"
            for controller in ["memory", "pids", "cpu"]
            where !cgroupControllers.contains(controller) {
                if cgroups.unified?.controllers.contains(controller) == true {
                    add(
                        .missing,
                        "the \(controller) controller is not delegated to appd's cgroup "
                            + "\(own): run appd under systemd with Delegate=yes")
                } else {
                    add(
                        .missing,
                        "the \(controller) controller is not available: build the "
                            + "kernel with \(kernelOption[controller] ?? "it")")
                }
            }
        case .hybrid, .legacy:
            for controller in ["memory", "pids", "cpu"]
            where !cgroupControllers.contains(controller) {
                add(
                    .missing,
                    "no cgroup v1 hierarchy carries the \(controller) controller: "
                        + "build the kernel with \(kernelOption[controller] ?? "it") and mount it")
            }
            add(
                .limited,
                "cgroup v1 (\(cgroups.mode.rawValue) layout) limits through separate hierarchies; "
                    + "boot with systemd.unified_cgroup_hierarchy=1 for unified cgroup v2"
            )
            if cgroups.mode == .legacy && !cgroupControllers.contains("freezer") {
                add(
                    .missing,
                    "instances cannot be frozen: no cgroup2 tree and no v1 freezer "
                        + "(\(kernelOption["freezer"] ?? ""))")
            }
        }
        if cgroups.unified != nil {
            if !cgroupFreeze {
                add(.limited, "cgroup.freeze needs Linux 5.2: instances cannot be frozen")
            }
            if !cgroupKill {
                add(
                    .limited,
                    "cgroup.kill needs Linux 5.14: kill() falls back to SIGKILLing "
                        + "each process until the cgroup is empty")
            }
        }
        return problems
    }
}

extension HostFeatures: CustomStringConvertible {
    /// A table for `appd doctor`, then the problems.
    public var description: String {
        func yes(_ value: Bool) -> String { value ? "yes" : "no" }
        let landlock: String =
            switch landlockStatus {
            case .available: "ABI \(landlockABI)"
            case .disabledAtBoot: "built, not enabled at boot"
            case .notBuilt: "not built"
            case .unknown: "unknown (probe failed)"
            }
        var cgroupText = cgroups.mode.rawValue
        if !cgroups.v1.isEmpty {
            cgroupText +=
                "; v1: "
                + cgroups.v1.map { $0.controllers.joined(separator: ",") }
                .joined(separator: " ")
        }
        if let unified = cgroups.unified {
            var v2 = "; v2 at \(unified.mountPoint)"
            v2 += " (own cgroup \(unified.ownCgroup ?? "not visible")"
            if cgroups.mode == .unified {
                v2 += ", controllers: \(cgroupControllers.joined(separator: " "))"
            }
            v2 += ", freeze: \(yes(cgroupFreeze)), kill: \(yes(cgroupKill)))"
            cgroupText += v2
        }
        var userns = yes(userNamespaces)
        if let maxUserNamespaces { userns += " (max \(maxUserNamespaces))" }
        let rows: [(String, String)] = [
            ("kernel", kernelRelease),
            ("landlock", landlock),
            (
                "seccomp filter",
                seccompFilter
                    ? "yes (actions: \(seccompActions.joined(separator: " ")))" : "no"
            ),
            ("user namespaces", userns),
            ("namespaces", namespaces.joined(separator: " ")),
            ("cgroups", cgroupText),
            ("pidfd_open", yes(pidfd)),
        ]
        var lines = rows.map { name, value in
            name + String(repeating: " ", count: max(1, 17 - name.count)) + value
        }
        let problems = problems
        if !problems.isEmpty {
            lines.append("problems:")
            lines += problems.map { "  [\($0.severity.rawValue)] \($0)" }
        }
        return lines.joined(separator: "\n")
    }
}
