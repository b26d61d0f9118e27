// Used by scripts/bench-launch: writes the seccomp BPF program appd gives an app without
// entitlements, the same rules in the same order as SandboxPolicy.baselineSeccomp +
// noWritableExecutableMemory + noPtrace (Sources/Sandbox/SandboxPolicy+Seccomp.swift), compiled
// the way SeccompCompiler does it (default allow, foreign ABIs kill the process, no NNP
// attribute) and exported with seccomp_export_bpf. bench-launch compares the result with the
// filter appd itself hands appd-exec and says so if this copy has fallen behind.
//
//   gcc -O2 -o bench-launch-bpf scripts/bench-launch-bpf.c -lseccomp
//   bench-launch-bpf OUT.bpf
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static scmp_filter_ctx ctx;

static void check(int result, const char *what) {
    if (result != 0) {
        fprintf(stderr, "bench-launch-bpf: %s: %s\n", what, strerror(-result));
        exit(1);
    }
}

// One rule; a name this architecture does not have (create_module on x86_64 ...) is skipped,
// as SeccompCompiler does.
static void rule(const char *name, int err, unsigned count, const struct scmp_arg_cmp *args) {
    int number = seccomp_syscall_resolve_name(name);
    if (number == __NR_SCMP_ERROR || number < 0) return;
    check(seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(err), number, count, args), name);
}

static void deny(int err, const char *const *names) {
    for (; *names; names++) rule(*names, err, 0, NULL);
}

#define DENY(err, ...) deny(err, (const char *const[]){__VA_ARGS__, NULL})
#define ARG(i, op, a, b) ((struct scmp_arg_cmp){(i), (op), (a), (b)})
#define HAS_BITS(i, bits) ARG(i, SCMP_CMP_MASKED_EQ, (bits), (bits))

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bench-launch-bpf OUT.bpf\n");
        return 2;
    }
    ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        fprintf(stderr, "bench-launch-bpf: seccomp_init failed\n");
        return 1;
    }
    check(seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), "badarch");
    check(seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0), "nnp");

    // baselineSeccomp
    DENY(ENOSYS, "clone3");
    static const scmp_datum_t namespace_flags[] = {
        0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x80,
    };
    for (size_t i = 0; i < sizeof namespace_flags / sizeof *namespace_flags; i++) {
        struct scmp_arg_cmp bits = HAS_BITS(0, namespace_flags[i]);
        rule("clone", EPERM, 1, &bits);
    }
    DENY(EPERM, "unshare", "setns");
    DENY(EPERM, "mount", "umount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
         "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr");
    DENY(EPERM, "perf_event_open");
    DENY(EPERM, "bpf");
    DENY(EPERM, "userfaultfd");
    DENY(EPERM, "io_uring_setup", "io_uring_enter", "io_uring_register");
    DENY(EPERM, "keyctl", "add_key", "request_key");
    DENY(EPERM, "kexec_load", "kexec_file_load", "reboot");
    DENY(EPERM, "init_module", "finit_module", "delete_module", "create_module", "query_module",
         "get_kernel_syms");
    DENY(EPERM, "acct", "swapon", "swapoff", "quotactl", "quotactl_fd", "nfsservctl");
    DENY(EPERM, "syslog");
    DENY(EPERM, "lookup_dcookie", "open_by_handle_at", "name_to_handle_at", "fanotify_init");
    DENY(EPERM, "iopl", "ioperm", "vhangup", "uselib", "_sysctl", "sysfs", "ustat");
    DENY(EPERM, "settimeofday", "clock_settime", "clock_adjtime", "sethostname", "setdomainname");

    // personality(0xffffffff) is allowed (logged); any value but PER_LINUX (0) is refused.
    struct scmp_arg_cmp persona_read = ARG(0, SCMP_CMP_EQ, 0xFFFFFFFF, 0);
    check(seccomp_rule_add_array(ctx, SCMP_ACT_LOG, seccomp_syscall_resolve_name("personality"),
                                 1, &persona_read),
          "personality");
    struct scmp_arg_cmp persona_change = ARG(0, SCMP_CMP_NE, 0, 0);
    rule("personality", EPERM, 1, &persona_change);

    // TIOCSTI, TIOCLINUX, compared on the low 32 bits of the request.
    static const scmp_datum_t tty_requests[] = {0x5412, 0x541C};
    for (size_t i = 0; i < 2; i++) {
        struct scmp_arg_cmp request = ARG(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, tty_requests[i]);
        rule("ioctl", EPERM, 1, &request);
    }

    // TIOCSETD: a line discipline's module loaded on demand.
    struct scmp_arg_cmp ldisc = ARG(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, 0x5423);
    rule("ioctl", EPERM, 1, &ldisc);

    // FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR: the data container's project quota.
    static const scmp_datum_t quota_requests[] = {0x40086602, 0x40046602, 0x401C5820};
    for (size_t i = 0; i < 3; i++) {
        struct scmp_arg_cmp request = ARG(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, quota_requests[i]);
        rule("ioctl", EPERM, 1, &request);
    }

    // Address families: only unix (1), inet (2), inet6 (10) and netlink (16), below AF_MAX 46.
    for (scmp_datum_t family = 0; family < 46; family++) {
        if (family == 1 || family == 2 || family == 10 || family == 16) continue;
        struct scmp_arg_cmp equal = ARG(0, SCMP_CMP_EQ, family, 0);
        rule("socket", EAFNOSUPPORT, 1, &equal);
    }
    struct scmp_arg_cmp beyond = ARG(0, SCMP_CMP_GE, 46, 0);
    rule("socket", EAFNOSUPPORT, 1, &beyond);
    struct scmp_arg_cmp netlink_other[] = {ARG(0, SCMP_CMP_EQ, 16, 0), ARG(2, SCMP_CMP_NE, 0, 0)};
    rule("socket", EPERM, 2, netlink_other);

    // noWritableExecutableMemory: PROT_WRITE|PROT_EXEC together, SHM_EXEC.
    static const char *const prot_calls[] = {"mmap", "mprotect", "pkey_mprotect"};
    for (size_t i = 0; i < 3; i++) {
        struct scmp_arg_cmp write_exec = HAS_BITS(2, 0x2 | 0x4);
        rule(prot_calls[i], EACCES, 1, &write_exec);
    }
    struct scmp_arg_cmp shm_exec = HAS_BITS(2, 0100000);
    rule("shmat", EACCES, 1, &shm_exec);
    // ... no shared executable mapping (PROT_EXEC with MAP_SHARED), no memfd.
    struct scmp_arg_cmp shared_exec[] = {HAS_BITS(2, 0x4), HAS_BITS(3, 0x1)};
    rule("mmap", EACCES, 2, shared_exec);
    DENY(EPERM, "memfd_create");

    // noPtrace
    DENY(EPERM, "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp");

    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "bench-launch-bpf: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    check(seccomp_export_bpf(ctx, fd), "seccomp_export_bpf");
    if (close(fd) != 0) {
        fprintf(stderr, "bench-launch-bpf: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    seccomp_release(ctx);
    return 0;
}
