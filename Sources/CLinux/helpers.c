#define _GNU_SOURCE
#include "appd_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

// The launcher's helpers (the outer launcher, PID 1, the output relay) give up the host's
// privileges once their privileged work is done (docs/launcher-protocol.md, "The helpers").
// In C because the seccomp program is built instruction by instruction (struct sock_filter and
// the BPF macros are not usable from Swift) and the capability calls have no glibc wrappers.

#if defined(__x86_64__)
#define HELPER_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define HELPER_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

// A helper's program: small (a few dozen syscalls), so a fixed array.
#define HELPER_MAX_INSTRUCTIONS 256

struct helper_program {
    struct sock_filter code[HELPER_MAX_INSTRUCTIONS];
    unsigned count;
    int overflow;
};

static void emit(struct helper_program *p, struct sock_filter instruction) {
    if (p->count >= HELPER_MAX_INSTRUCTIONS) {
        p->overflow = 1;
        return;
    }
    p->code[p->count++] = instruction;
}

#define ARG_LOW(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define ARG_HIGH(n) (offsetof(struct seccomp_data, args) + 8 * (n) + 4)
#define DENY (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))

// nr → allow. The accumulator holds the syscall number and keeps it when nr does not match.
static void allow(struct helper_program *p, long nr) {
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
}

// nr → allowed only when argument `arg` (an int: a pid or an fd) is `value`, and the other
// argument `arg2` too when >= 0. Every path inside the block returns, so the accumulator's
// nr is only needed when the block is skipped.
static void allow_if_args(struct helper_program *p, long nr, int arg, uint32_t value, int arg2,
                          uint32_t value2) {
    // The block after this jump: 4 instructions per argument, then allow, then deny (its last,
    // at `length`); every jump below lands on one of those two.
    int length = arg2 >= 0 ? 10 : 6;
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, length));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HIGH(arg)));
    // An int argument is sign-extended into the register: a non-negative one has 0 above.
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, length - 3));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(arg)));
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, 0, length - 5));
    if (arg2 >= 0) {
        emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HIGH(arg2)));
        emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3));
        emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(arg2)));
        emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value2, 0, 1));
    }
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, DENY));
}

// nr → allowed only when none of `bits` is set in argument `arg` (its low 32 bits: flags).
static void allow_without_bits(struct helper_program *p, long nr, int arg, uint32_t bits) {
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 4));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(arg)));
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, bits, 1, 0));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, DENY));
}

// What every helper does after it gave up its privileges: wait, read and write the fds it
// holds, allocate memory (never executable), tell the time, exit. Nothing that opens a path,
// makes a namespace, mounts, changes an id or execs.
static void allow_common(struct helper_program *p) {
    long plain[] = {
        SYS_read, SYS_write, SYS_writev, SYS_pread64, SYS_lseek, SYS_close, SYS_fcntl,
        SYS_dup3, SYS_fstat, SYS_newfstatat, SYS_exit, SYS_exit_group, SYS_rt_sigreturn,
        SYS_rt_sigprocmask, SYS_rt_sigtimedwait, SYS_restart_syscall, SYS_wait4, SYS_waitid,
        SYS_brk, SYS_munmap, SYS_mremap, SYS_madvise, SYS_futex, SYS_getpid, SYS_gettid,
        SYS_getppid, SYS_clock_gettime, SYS_clock_nanosleep, SYS_nanosleep, SYS_ppoll,
        SYS_sched_yield, SYS_getrandom, SYS_pidfd_open,
#ifdef SYS_poll
        SYS_poll,
#endif
#ifdef SYS_dup2
        SYS_dup2,
#endif
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) allow(p, plain[i]);
    allow_without_bits(p, SYS_mmap, 2, PROT_EXEC);
    allow_without_bits(p, SYS_mprotect, 2, PROT_EXEC);
}

static int install(const struct appd_helper_confinement *c) {
#ifndef HELPER_AUDIT_ARCH
    (void)c;
    errno = ENOSYS;
    return -1;
#else
    struct helper_program p = {.count = 0, .overflow = 0};
    emit(&p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
    emit(&p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, HELPER_AUDIT_ARCH, 1, 0));
    emit(&p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    emit(&p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
#ifdef __X32_SYSCALL_BIT
    emit(&p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1));
    emit(&p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
    allow_common(&p);
    if (c->peer > 0) allow_if_args(&p, SYS_kill, 0, (uint32_t)c->peer, -1, 0);
    switch (c->kind) {
    case APPD_HELPER_RELAY:
        // Its log folder only (Landlock keeps it below that folder as well, where the kernel
        // has Landlock); the journal socket; the lock memfd.
        allow_if_args(&p, SYS_openat, 0, (uint32_t)c->directory_fd, -1, 0);
#ifdef SYS_renameat
        allow_if_args(&p, SYS_renameat, 0, (uint32_t)c->directory_fd, 2,
                      (uint32_t)c->directory_fd);
#endif
        allow_if_args(&p, SYS_renameat2, 0, (uint32_t)c->directory_fd, 2,
                      (uint32_t)c->directory_fd);
        allow(&p, SYS_ftruncate);
        allow(&p, SYS_flock);
        allow(&p, SYS_sendto);
        allow(&p, SYS_sendmsg);
        break;
    case APPD_HELPER_INIT:
        // --init-signals reads /proc/PID/status of the app: opened for reading, nothing else.
        if (c->read_only_opens)
            allow_without_bits(&p, SYS_openat, 2,
                               O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_TMPFILE);
        break;
    default:
        break;
    }
    emit(&p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, DENY));
    if (p.overflow) {
        errno = E2BIG;
        return -1;
    }
    struct sock_fprog program = {.len = (unsigned short)p.count, .filter = p.code};
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program);
#endif
}

// The relay may make, write, truncate, rename and remove files in its log folder and nothing
// else of any filesystem. Best effort: a kernel without Landlock still has the seccomp rule
// (openat and renameat only relative to that folder's fd).
static int restrict_relay_files(int directory_fd) {
    int abi = appd_landlock_abi();
    if (abi < 1) return 0;
    uint64_t handled = (APPD_LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1's rights
    if (abi >= 2) handled |= APPD_LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) handled |= APPD_LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5) handled |= APPD_LANDLOCK_ACCESS_FS_IOCTL_DEV;
    uint64_t allowed = APPD_LANDLOCK_ACCESS_FS_WRITE_FILE | APPD_LANDLOCK_ACCESS_FS_READ_FILE |
                       APPD_LANDLOCK_ACCESS_FS_REMOVE_FILE | APPD_LANDLOCK_ACCESS_FS_MAKE_REG;
    if (abi >= 3) allowed |= APPD_LANDLOCK_ACCESS_FS_TRUNCATE;
    int ruleset = appd_landlock_create_ruleset(handled, 0, 0, abi);
    if (ruleset < 0) return -1;
    int result = appd_landlock_add_path_rule(ruleset, directory_fd, allowed);
    if (result == 0) result = appd_landlock_restrict_self(ruleset, 0);
    int saved = errno;
    close(ruleset);
    errno = saved;
    return result;
}

int appd_confine_helper(const struct appd_helper_confinement *c) {
    uint64_t kept = 0;
    if (c->kind == APPD_HELPER_INIT && c->user_namespace_pidfd >= 0) {
        // A plain container's PID 1: into the container's user namespace, where its root's
        // CAP_KILL reaches the container's processes whatever ids they take; no capability is
        // left in the host's (setns gives every capability in the new namespace only).
        if (setns(c->user_namespace_pidfd, CLONE_NEWUSER) == 0) {
            kept = 1ULL << CAP_KILL;
        } else if (errno != ESRCH) {
            return -1;
        }
        // ESRCH: the app has ended already (a zombie has no namespaces left): there is nothing
        // to signal, and PID 1 keeps nothing at all.
    }
    for (int cap = 0; cap <= c->last_capability; cap++) {
        if ((kept >> cap) & 1) continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return -1;
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return -1;
    // uid 0 gains nothing back: not by exec (seccomp refuses it anyway), not by a change of ids.
    int bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
               SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
               SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) return -1;
    if (c->kind == APPD_HELPER_INIT && c->user_namespace_pidfd < 0 && c->effective_uid >= 0) {
        // PID 1 signals the app as the app's own uid (kill's rule: the sender's effective uid is
        // the target's real one), while its real and saved uid stay 0: the app cannot ptrace,
        // prlimit or signal it (those need every id of the target to be the caller's).
        if (setresuid(0, (uid_t)c->effective_uid, 0) != 0) return -1;
    }
    if (appd_capset_masks(kept, kept, 0) != 0) return -1;
    if (c->pdeath_signal > 0) {
        // A change of effective uid clears it: armed again, then the parent checked, since it
        // may have died in between and nobody would then kill us.
        if (prctl(PR_SET_PDEATHSIG, c->pdeath_signal, 0, 0, 0) != 0) return -1;
        if (c->parent_pidfd >= 0 && appd_pidfd_exited(c->parent_pidfd) != 0) {
            errno = ESRCH;
            return -1;
        }
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    if (c->kind == APPD_HELPER_RELAY && restrict_relay_files(c->directory_fd) != 0) return -1;
    return install(c);
}

pid_t appd_fork_into_cgroup(int cgroup) {
#ifdef SYS_clone3
    struct clone_args args = {
        .flags = CLONE_INTO_CGROUP,
        .exit_signal = SIGCHLD,
        .cgroup = (uint64_t)cgroup,
    };
    return (pid_t)syscall(SYS_clone3, &args, sizeof args);
#else
    (void)cgroup;
    errno = ENOSYS;
    return -1;
#endif
}
