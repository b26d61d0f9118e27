import AppdBase
import CLinux
import CSeccomp
import Glibc

/// Turns `SeccompRules` into the BPF program `appd-exec` installs, with libseccomp: done once
/// per profile in the daemon, so the launcher carries no policy logic and no libseccomp.
public enum SeccompCompiler {
    /// The raw `struct sock_filter` array for this machine's native ABI, as
    /// `seccomp_export_bpf` writes it. Calls through any other ABI kill the process.
    public static func bpf(for filter: SeccompRules) throws -> [UInt8] {
        guard let context = seccomp_init(SCMP_ACT_ALLOW) else {
            throw AppdError(.io, "seccomp_init failed")
        }
        defer { seccomp_release(context) }
        try check(
            seccomp_attr_set(context, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS),
            "set the foreign-ABI action")
        // No TSYNC and no NNP flag: the launcher sets no_new_privs itself and is
        // single-threaded when it installs the filter.
        try check(seccomp_attr_set(context, SCMP_FLTATR_CTL_NNP, 0), "clear the NNP attribute")

        for rule in filter.rules {
            let number = seccomp_syscall_resolve_name(rule.syscall)
            // A name this architecture does not have (create_module on x86_64 ...) needs no rule.
            guard number != __NR_SCMP_ERROR, number >= 0 else { continue }
            let action: UInt32 =
                switch rule.action {
                case .errno(let code): appd_scmp_act_errno(UInt16(code))
                case .log: SCMP_ACT_LOG
                }
            let conditions = rule.conditions.map { condition -> scmp_arg_cmp in
                let index = UInt32(condition.index)
                switch condition.op {
                case .equal: return appd_scmp_arg(index, SCMP_CMP_EQ, condition.value, 0)
                case .notEqual: return appd_scmp_arg(index, SCMP_CMP_NE, condition.value, 0)
                case .greater: return appd_scmp_arg(index, SCMP_CMP_GT, condition.value, 0)
                case .greaterOrEqual: return appd_scmp_arg(index, SCMP_CMP_GE, condition.value, 0)
                case .less: return appd_scmp_arg(index, SCMP_CMP_LT, condition.value, 0)
                case .maskedEqual:
                    return appd_scmp_arg(
                        index, SCMP_CMP_MASKED_EQ, condition.mask ?? ~0, condition.value)
                }
            }
            let result = conditions.withUnsafeBufferPointer {
                seccomp_rule_add_array(context, action, number, UInt32($0.count), $0.baseAddress)
            }
            try check(result, "add the rule for \(rule.syscall) (\(rule.reason))")
        }

        // seccomp_export_bpf writes to an fd: a memfd keeps it off the filesystem.
        let fd = appd_memfd("appd-seccomp")
        guard fd >= 0 else { throw AppdError.system("memfd_create for the seccomp filter") }
        defer { close(fd) }
        try check(seccomp_export_bpf(context, fd), "export the seccomp filter")
        let size = lseek(fd, 0, SEEK_END)
        guard size > 0, size % 8 == 0 else {
            throw AppdError(.io, "libseccomp exported a filter of \(size) bytes")
        }
        var program = [UInt8](repeating: 0, count: Int(size))
        let read = program.withUnsafeMutableBytes { pread(fd, $0.baseAddress, Int(size), 0) }
        guard read == size else { throw AppdError.system("read back the seccomp filter") }
        return program
    }

    private static func check(_ result: Int32, _ step: String) throws {
        guard result == 0 else {
            throw AppdError(.io, "libseccomp: \(step): \(errnoName(-result))", errno: -result)
        }
    }
}

extension SeccompCompiler {
    /// The name of system call `number` on this machine's ABI (`openat`), or nil. For the
    /// denial log: the kernel's audit records name system calls by number.
    public static func syscallName(_ number: Int) -> String? {
        guard let number = Int32(exactly: number), number >= 0,
            let name = seccomp_syscall_resolve_num_arch(UInt32(SCMP_ARCH_NATIVE), number)
        else { return nil }
        defer { free(name) }
        return String(cString: name)
    }
}
