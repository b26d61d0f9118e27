import CLinux
import Glibc

extension KernelLayers {
    /// This kernel, as it is now: one system call and one small /proc read.
    public static func detect() -> KernelLayers {
        KernelLayers(landlockABI: max(0, Int(appd_landlock_abi_version())), seccomp: seccompFiltersAvailable())
    }

    /// Seccomp filters are there when the kernel lists the actions the filter uses.
    static func seccompFiltersAvailable(procRoot: String = "/proc") -> Bool {
        guard let file = fopen("\(procRoot)/sys/kernel/seccomp/actions_avail", "r") else { return false }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 256)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return false }
        let actions = String(cString: buffer).split(whereSeparator: { $0 == " " || $0 == "\n" })
        return actions.contains("errno") && actions.contains("kill_process")
    }
}
