import CLinux
import Glibc

extension KernelLayers {
    /// The layers a full `HostFeatures` reading found.
    public init(_ host: HostFeatures) {
        self.init(
            landlockABI: host.landlockABI, seccomp: host.seccompFilter, mdwe: Self.detectMDWE(),
            memfdNoexec: Self.detectMemfdNoexec())
    }

    /// PR_GET_MDWE answers (0 for a process without the flag) from Linux 6.3; EINVAL before.
    static func detectMDWE() -> Bool { appd_prctl_get_mdwe() >= 0 }

    static func detectMemfdNoexec() -> Bool { access("/proc/sys/vm/memfd_noexec", F_OK) == 0 }

    /// This kernel, as it is now, with the same checks as `HostFeatures.detect()` but only
    /// those the policy needs (one system call or access each and one small /proc read), since
    /// every launch asks.
    public static func detect() -> KernelLayers {
        let landlock = appd_landlock_abi_version()
        let landlockProbe = landlock >= 0 ? landlock : -errno
        let abi = HostFeatures.landlockStatus(landlockProbe) == .available ? Int(landlockProbe) : 0
        let seccomp =
            appd_prctl_get_seccomp() >= 0
            && HostFeatures.filterActionsPresent(HostFeatures.seccompActions())
        return KernelLayers(
            landlockABI: abi, seccomp: seccomp, mdwe: detectMDWE(), memfdNoexec: detectMemfdNoexec()
        )
    }
}
