import Foundation
import Testing

@testable import Sandbox

@Suite("HostFeatures on fake kernels")
struct HostFeaturesTests {
    /// The messages of every problem, for `contains` checks.
    func messages(_ features: HostFeatures, _ severity: HostFeatures.Problem.Severity? = nil)
        -> [String]
    {
        features.problems.filter { severity == nil || $0.severity == severity }.map(\.description)
    }

    @Test("a full kernel with a delegated unified cgroup reports no problems")
    func fullKernel() {
        let features = FakeHost().detect()
        #expect(features.problems == [])
        #expect(features.landlockABI == 7)
        #expect(features.landlockStatus == .available)
        #expect(features.seccompFilter && features.userNamespaces && features.pidfd)
        #expect(features.cgroups.mode == .unified)
        #expect(features.cgroups.unified?.ownCgroup == "/system.slice/appd.service")
        #expect(features.cgroupControllers == ["cpu", "memory", "pids"])
        #expect(features.cgroupFreeze && features.cgroupKill)
        #expect(features.kernelRelease == "6.18.0")
    }

    @Test("Landlock disabled at boot names the lsm= boot parameter")
    func landlockDisabledAtBoot() {
        let features = FakeHost().detect(.full.with(landlock: -EOPNOTSUPP))
        #expect(features.landlockStatus == .disabledAtBoot)
        #expect(features.landlockABI == 0)
        let landlock = messages(features, .missing).filter { $0.hasPrefix("landlock:") }
        #expect(landlock.count == 1)
        #expect(
            landlock.first?.contains("Landlock is not enabled: boot with lsm=...,landlock") == true)
    }

    @Test("a kernel without Landlock names CONFIG_SECURITY_LANDLOCK")
    func landlockNotBuilt() {
        let features = FakeHost().detect(.full.with(landlock: -ENOSYS))
        #expect(features.landlockStatus == .notBuilt)
        #expect(messages(features, .missing).contains { $0.contains("CONFIG_SECURITY_LANDLOCK=y") })
        #expect(!messages(features).contains { $0.contains("lsm=") })
    }

    @Test("an old Landlock ABI is limited: no TCP rules before ABI 4, no scoping before ABI 6")
    func oldLandlock() {
        let abi3 = messages(FakeHost().detect(.full.with(landlock: 3)), .limited)
        #expect(abi3.contains { $0.contains("TCP") && $0.contains("ABI 4 (Linux 6.7)") })
        #expect(abi3.contains { $0.contains("scope") && $0.contains("ABI 6 (Linux 6.12)") })
        let abi5 = messages(FakeHost().detect(.full.with(landlock: 5)), .limited)
        #expect(!abi5.contains { $0.contains("TCP") })
        #expect(abi5.contains { $0.contains("ABI 6") })
        #expect(FakeHost().detect(.full.with(landlock: 6)).problems.isEmpty)
    }

    @Test("without actions_avail, seccomp filters need CONFIG_SECCOMP_FILTER")
    func noSeccompFilter() {
        let host = FakeHost()
        host.remove("proc/sys/kernel/seccomp")
        let features = host.detect()
        #expect(!features.seccompFilter)
        #expect(
            messages(features, .missing) == [
                "seccomp: seccomp filters need CONFIG_SECCOMP_FILTER=y "
                    + "(/proc/sys/kernel/seccomp/actions_avail is missing)"
            ])
    }

    @Test("prctl(PR_GET_SECCOMP) failing names CONFIG_SECCOMP")
    func noSeccompAtAll() {
        let features = FakeHost().detect(.full.with(seccomp: -EINVAL))
        #expect(!features.seccomp && !features.seccompFilter)
        #expect(messages(features, .missing).contains { $0.contains("CONFIG_SECCOMP=y") })
    }

    @Test("seccomp without kill_process (before 4.14) is missing")
    func oldSeccomp() {
        let host = FakeHost()
        host.write("proc/sys/kernel/seccomp/actions_avail", "kill trap errno trace allow\n")
        #expect(
            messages(host.detect(), .missing).contains {
                $0.contains("kill_process") && $0.contains("Linux 4.14")
            })
    }

    @Test("user namespaces switched off by sysctl name user.max_user_namespaces")
    func userNamespacesDisabled() {
        let host = FakeHost()
        host.write("proc/sys/user/max_user_namespaces", "0\n")
        host.write("proc/sys/kernel/unprivileged_userns_clone", "0\n")
        let features = host.detect()
        #expect(!features.userNamespaces)
        #expect(features.unprivilegedUserNamespaceClone == false)
        let text = messages(features, .limited)
        #expect(text.contains { $0.contains("user.max_user_namespaces=0") })
        #expect(text.contains { $0.contains("kernel.unprivileged_userns_clone=0") })
    }

    @Test("a kernel without user namespaces names CONFIG_USER_NS")
    func userNamespacesNotBuilt() {
        let host = FakeHost()
        host.remove("proc/self/ns/user")
        host.remove("proc/sys/user/max_user_namespaces")
        let features = host.detect()
        #expect(features.maxUserNamespaces == nil)
        #expect(messages(features).contains { $0.contains("CONFIG_USER_NS=y") })
    }

    @Test("missing pid and net namespaces name their kernel options")
    func missingNamespaces() {
        let host = FakeHost()
        host.remove("proc/self/ns/pid")
        host.remove("proc/self/ns/net")
        let missing = messages(host.detect(), .missing)
        #expect(
            missing.contains { $0.hasPrefix("pid namespace:") && $0.contains("CONFIG_PID_NS=y") })
        #expect(
            missing.contains { $0.hasPrefix("net namespace:") && $0.contains("CONFIG_NET_NS=y") })
        #expect(missing.count == 2)
    }

    @Test("a unified host whose cgroup is not delegated asks for Delegate=yes")
    func undelegated() {
        let host = FakeHost()
        host.write("sys/fs/cgroup/system.slice/appd.service/cgroup.controllers", "\n")
        let missing = messages(host.detect(), .missing)
        #expect(missing.count == 3)
        #expect(missing.allSatisfy { $0.contains("Delegate=yes") })
        #expect(missing.contains { $0.contains("memory controller is not delegated") })
    }

    @Test("a unified kernel without the memory controller names CONFIG_MEMCG")
    func noMemcg() {
        let host = FakeHost()
        host.write("sys/fs/cgroup/cgroup.controllers", "cpu io pids\n")
        host.write("sys/fs/cgroup/system.slice/appd.service/cgroup.controllers", "cpu pids\n")
        #expect(
            messages(host.detect(), .missing) == [
                "cgroups: the memory controller is not available: build the kernel with "
                    + "CONFIG_MEMCG=y"
            ])
    }

    @Test("this machine's hybrid layout works, limited, with the boot parameter for v2")
    func hybrid() {
        let host = FakeHost()
        host.makeHybrid()
        let features = host.detect()
        #expect(features.cgroups.mode == .hybrid)
        #expect(messages(features, .missing) == [])
        #expect(
            messages(features, .limited) == [
                "cgroups: cgroup v1 (hybrid layout) limits through separate hierarchies; boot with "
                    + "systemd.unified_cgroup_hierarchy=1 for unified cgroup v2"
            ])
        #expect(features.cgroupFreeze && features.cgroupKill)
    }

    @Test("a kernel before 5.14 has no cgroup.kill; the bare v2 root is judged by its release")
    func noCgroupKill() {
        let host = FakeHost()
        host.makeHybrid()
        host.remove("sys/fs/cgroup/unified/some-child")
        host.write("proc/sys/kernel/osrelease", "5.10.0-28-amd64\n")
        let features = host.detect()
        #expect(features.cgroupFreeze && !features.cgroupKill)
        #expect(
            messages(features, .limited).contains { $0.contains("cgroup.kill needs Linux 5.14") })
    }

    @Test("no cgroup filesystem at all is missing and names CONFIG_CGROUPS")
    func noCgroups() {
        let host = FakeHost()
        host.write("proc/self/mountinfo", "22 27 0:21 / /proc rw - proc proc rw\n")
        let features = host.detect()
        #expect(features.cgroups.mode == .none)
        #expect(
            messages(features, .missing) == [
                "cgroups: no cgroup filesystem is mounted: build with CONFIG_CGROUPS=y and mount "
                    + "cgroup2 on /sys/fs/cgroup"
            ])
    }

    @Test("without pidfd_open the fallback is named")
    func noPidfd() {
        #expect(
            messages(FakeHost().detect(.full.with(pidfd: -ENOSYS)), .limited) == [
                "pidfd: pidfd_open needs Linux 5.3: appd falls back to waiting on pids, which a "
                    + "recycled pid can confuse"
            ])
    }

    @Test("the description lists every feature and every problem; JSON round-trips")
    func descriptionAndJSON() throws {
        let host = FakeHost()
        host.makeHybrid()
        let features = host.detect(.full.with(landlock: -EOPNOTSUPP))
        let text = features.description
        #expect(text.contains("landlock         built, not enabled at boot"))
        #expect(text.contains("cgroups          hybrid; v1: cpu cpuacct cpuset memory"))
        for problem in features.problems { #expect(text.contains(problem.description)) }
        let data = try JSONEncoder().encode(features)
        #expect(try JSONDecoder().decode(HostFeatures.self, from: data) == features)
    }

    @Test("live detection on this host agrees with /proc")
    func live() throws {
        let features = HostFeatures.detect()
        let actions = try String(
            contentsOfFile: "/proc/sys/kernel/seccomp/actions_avail",
            encoding: .utf8)
        #expect(
            features.seccompActions.joined(separator: " ")
                == actions.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(features.namespaces.contains("pid") == exists("/proc/self/ns/pid"))
        let release = try String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)
        #expect(features.kernelRelease == release.trimmingCharacters(in: .whitespacesAndNewlines))
        // The probe must agree with a direct landlock_create_ruleset through the shim.
        #expect(
            features.landlockABI
                == max(
                    0,
                    Int(
                        HostFeatures.SyscallProbes.live()
                            .landlockCreateRulesetVersion)))
        print(features)
    }
}
