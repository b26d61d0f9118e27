#define _GNU_SOURCE
#include "appd_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/fsuid.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <linux/sched.h>
#include <unistd.h>

int appd_unshare(int flags) { return unshare(flags); }

int appd_setns(int fd, int type) { return setns(fd, type); }

int appd_pivot_root(const char *new_root, const char *put_old) {
    return (int)syscall(SYS_pivot_root, new_root, put_old);
}

// struct mount_attr from <linux/mount.h>; spelled out because <sys/mount.h> and <linux/mount.h>
// conflict in glibc 2.36.
struct appd_mount_attr {
    uint64_t attr_set;
    uint64_t attr_clr;
    uint64_t propagation;
    uint64_t userns_fd;
};

int appd_mount_setattr_recursive(const char *path, uint64_t attr_set) {
    struct appd_mount_attr attr = {.attr_set = attr_set};
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE | AT_SYMLINK_NOFOLLOW,
                        &attr, sizeof attr);
}

static long locked_flags(const struct statvfs *st) {
    long flags = 0;
    if (st->f_flag & ST_NOSUID) flags |= MS_NOSUID;
    if (st->f_flag & ST_NODEV) flags |= MS_NODEV;
    if (st->f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (st->f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (st->f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (st->f_flag & ST_RELATIME) flags |= MS_RELATIME;
    return flags;
}

long appd_locked_mount_flags(const char *path) {
    struct statvfs st;
    if (statvfs(path, &st) != 0) return -1;
    return locked_flags(&st);
}

long appd_locked_mount_flags_fd(int fd) {
    struct statvfs st;
    if (fstatvfs(fd, &st) != 0) return -1;
    return locked_flags(&st);
}

// From <linux/mount.h> (which conflicts with <sys/mount.h> in glibc 2.36).
#define APPD_OPEN_TREE_CLONE 1
#define APPD_MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#define APPD_MOVE_MOUNT_T_SYMLINKS 0x00000010

int appd_open_tree_clone(const char *path, int recursive) {
    unsigned flags = APPD_OPEN_TREE_CLONE | O_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
    return (int)syscall(SYS_open_tree, AT_FDCWD, path, flags);
}

int appd_move_mount_onto(int fd, const char *target) {
    return (int)syscall(SYS_move_mount, fd, "", AT_FDCWD, target,
                        APPD_MOVE_MOUNT_F_EMPTY_PATH | APPD_MOVE_MOUNT_T_SYMLINKS);
}

#define APPD_MOUNT_ATTR_IDMAP 0x00100000ULL

int appd_mount_setattr_idmap(int fd, int userns_fd, uint64_t attr_set) {
    struct appd_mount_attr attr = {.attr_set = attr_set | APPD_MOUNT_ATTR_IDMAP,
                                   .userns_fd = (uint64_t)userns_fd};
    return (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                        sizeof attr);
}

static int write_text(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t length = strlen(text);
    ssize_t written = write(fd, text, length);
    int saved = errno;
    close(fd);
    errno = saved;
    return written == (ssize_t)length ? 0 : -1;
}

int appd_setfsids(uint32_t uid, uint32_t gid) {
    setfsgid(gid);
    setfsuid(uid);
    // Neither reports failure: read back (an invalid id changes nothing, returns the current).
    if ((uint32_t)setfsgid((gid_t)-1) != gid || (uint32_t)setfsuid((uid_t)-1) != uid) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

long long appd_filesystem_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long long)(unsigned long)info.f_type;
}

int appd_mapping_userns(uint32_t uid, uint32_t gid, uint32_t count) {
    // ready: the child says it has unshared; hold: its end closing lets the child exit.
    int ready[2], hold[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return -1;
    if (pipe2(hold, O_CLOEXEC) != 0) {
        close(ready[0]);
        close(ready[1]);
        return -1;
    }
    pid_t child = fork();
    if (child < 0) {
        int saved = errno;
        close(ready[0]), close(ready[1]), close(hold[0]), close(hold[1]);
        errno = saved;
        return -1;
    }
    if (child == 0) {
        close(ready[0]);
        close(hold[1]);
        if (unshare(CLONE_NEWUSER) != 0) _exit(1);
        char byte = 'u';
        if (write(ready[1], &byte, 1) != 1) _exit(1);
        while (read(hold[0], &byte, 1) < 0 && errno == EINTR) {}
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    int result = -1;
    int saved = EPROTO;
    char byte;
    ssize_t got;
    do { got = read(ready[0], &byte, 1); } while (got < 0 && errno == EINTR);
    if (got == 1) {
        char path[64], line[64];
        snprintf(line, sizeof line, "0 %u %u\n", uid, count);
        snprintf(path, sizeof path, "/proc/%d/uid_map", (int)child);
        if (write_text(path, line) == 0) {
            snprintf(line, sizeof line, "0 %u %u\n", gid, count);
            snprintf(path, sizeof path, "/proc/%d/gid_map", (int)child);
            if (write_text(path, line) == 0) {
                snprintf(path, sizeof path, "/proc/%d/ns/user", (int)child);
                result = open(path, O_RDONLY | O_CLOEXEC);
            }
        }
        if (result < 0) saved = errno;
    }
    close(ready[0]);
    close(hold[1]);
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    if (result < 0) errno = saved;
    return result;
}

int appd_loopback_up(void) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct ifreq req;
    memset(&req, 0, sizeof req);
    strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
    int result = ioctl(fd, SIOCGIFFLAGS, &req);
    if (result == 0) {
        req.ifr_flags |= IFF_UP | IFF_RUNNING;
        result = ioctl(fd, SIOCSIFFLAGS, &req);
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return result;
}

int appd_set_no_new_privs(void) { return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); }
int appd_set_pdeathsig(int signo) { return prctl(PR_SET_PDEATHSIG, signo, 0, 0, 0); }
int appd_set_dumpable(int dumpable) { return prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0); }
int appd_set_child_subreaper(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }
int appd_capbset_drop(int cap) { return prctl(PR_CAPBSET_DROP, cap, 0, 0, 0); }
int appd_capbset_read(int cap) { return prctl(PR_CAPBSET_READ, cap, 0, 0, 0); }
int appd_set_mdwe_refuse_exec_gain(void) { return prctl(65 /* PR_SET_MDWE */, 1 /* PR_MDWE_REFUSE_EXEC_GAIN */, 0, 0, 0); }
int appd_cap_ambient_clear_all(void) {
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

int appd_capset_zero(void) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    return (int)syscall(SYS_capset, &header, data);
}

int appd_capset_masks(uint64_t effective, uint64_t permitted, uint64_t inheritable) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    data[0].effective = (uint32_t)effective;
    data[1].effective = (uint32_t)(effective >> 32);
    data[0].permitted = (uint32_t)permitted;
    data[1].permitted = (uint32_t)(permitted >> 32);
    data[0].inheritable = (uint32_t)inheritable;
    data[1].inheritable = (uint32_t)(inheritable >> 32);
    return (int)syscall(SYS_capset, &header, data);
}

int appd_cap_ambient_raise(int cap) { return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0); }
int appd_set_keepcaps(int keep) { return prctl(PR_SET_KEEPCAPS, keep, 0, 0, 0); }

int appd_setresuid(uid_t uid) { return setresuid(uid, uid, uid); }
int appd_setresgid(gid_t gid) { return setresgid(gid, gid, gid); }

int appd_open_path(const char *path) { return open(path, O_PATH | O_CLOEXEC); }

int appd_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int appd_close_range(unsigned int first, unsigned int last) {
    return close_range(first, last, 0);
}

int appd_rlimit_resource(const char *name) {
    static const struct {
        const char *name;
        int resource;
    } table[] = {
        {"as", RLIMIT_AS},           {"core", RLIMIT_CORE},
        {"cpu", RLIMIT_CPU},         {"data", RLIMIT_DATA},
        {"fsize", RLIMIT_FSIZE},     {"locks", RLIMIT_LOCKS},
        {"memlock", RLIMIT_MEMLOCK}, {"msgqueue", RLIMIT_MSGQUEUE},
        {"nice", RLIMIT_NICE},       {"nofile", RLIMIT_NOFILE},
        {"nproc", RLIMIT_NPROC},     {"rss", RLIMIT_RSS},
        {"rtprio", RLIMIT_RTPRIO},   {"rttime", RLIMIT_RTTIME},
        {"sigpending", RLIMIT_SIGPENDING}, {"stack", RLIMIT_STACK},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].name, name) == 0) return table[i].resource;
    }
    return -1;
}

int appd_getrlimit(int resource, uint64_t *soft, uint64_t *hard) {
    struct rlimit limit;
    if (getrlimit((__rlimit_resource_t)resource, &limit) != 0) return -1;
    *soft = limit.rlim_cur;
    *hard = limit.rlim_max;
    return 0;
}

int appd_setrlimit(int resource, uint64_t soft, uint64_t hard) {
    struct rlimit limit = {
        .rlim_cur = soft == APPD_RLIM_INFINITY ? RLIM_INFINITY : (rlim_t)soft,
        .rlim_max = hard == APPD_RLIM_INFINITY ? RLIM_INFINITY : (rlim_t)hard,
    };
    return setrlimit((__rlimit_resource_t)resource, &limit);
}

// Landlock UAPI up to ABI 7 (Linux 6.15), from include/uapi/linux/landlock.h.
struct appd_landlock_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;  // ABI 4
    uint64_t scoped;              // ABI 6
};
struct appd_landlock_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));
struct appd_landlock_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
};
#define APPD_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define APPD_LANDLOCK_RULE_PATH_BENEATH 1
#define APPD_LANDLOCK_RULE_NET_PORT 2
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

int appd_landlock_abi(void) {
    return (int)syscall(SYS_landlock_create_ruleset, NULL, 0,
                        APPD_LANDLOCK_CREATE_RULESET_VERSION);
}

int appd_landlock_create_ruleset(
    uint64_t handled_fs, uint64_t handled_net, uint64_t scoped, int abi) {
    struct appd_landlock_ruleset_attr attr = {
        .handled_access_fs = handled_fs, .handled_access_net = handled_net, .scoped = scoped};
    size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
    return (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
}

int appd_landlock_add_path_rule(int ruleset_fd, int parent_fd, uint64_t allowed_access) {
    struct appd_landlock_path_beneath_attr attr = {
        .allowed_access = allowed_access, .parent_fd = parent_fd};
    return (int)syscall(SYS_landlock_add_rule, ruleset_fd, APPD_LANDLOCK_RULE_PATH_BENEATH,
                        &attr, 0);
}

int appd_landlock_add_port_rule(int ruleset_fd, uint64_t port, uint64_t allowed_access) {
    struct appd_landlock_net_port_attr attr = {.allowed_access = allowed_access, .port = port};
    return (int)syscall(SYS_landlock_add_rule, ruleset_fd, APPD_LANDLOCK_RULE_NET_PORT, &attr, 0);
}

int appd_landlock_restrict_self(int ruleset_fd, uint32_t flags) {
    return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, flags);
}

int appd_seccomp_set_filter(const void *instructions, unsigned short count, int log_denials) {
    struct sock_fprog program = {.len = count, .filter = (struct sock_filter *)instructions};
    // SECCOMP_FILTER_FLAG_LOG: the kernel audits the filter's errno actions (when
    // kernel.seccomp.actions_logged lists errno), which is how the daemon's denial log learns
    // of them (docs/denials.md). Without the flag only kill actions are audited. The profile's
    // log-denials record asks for it (the daemon leaves it out when audit would panic the host).
    unsigned int flags = log_denials ? SECCOMP_FILTER_FLAG_LOG : 0;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &program);
}

int appd_pidfd_exited(int pidfd) {
    struct pollfd entry = {.fd = pidfd, .events = POLLIN};
    int ready = poll(&entry, 1, 0);
    if (ready < 0) return -1;
    return ready > 0 ? 1 : 0;
}

// The app process runs the launcher's Swift code (confinement, a few KiB of stack) until it
// execs: ample, and only the pages it touches are ever allocated.
#define APPD_SHARED_STACK_SIZE (512 * 1024)

// clone3(2) with CLONE_VM on a stack of its own, which glibc does not export (its __clone3 is
// private): the child starts on `stack`, so it must never return through the caller's frames.
// It calls child(argument) and exits with what that returns (child ends in execve or _exit).
// -1 with errno ENOSYS where this file has no code for the architecture: only x86_64, the one
// this project builds and tests on (the caller then spawns as before and moves the child).
#if defined(__x86_64__)
static long clone3_call(struct clone_args *args, int (*child)(void *), void *argument) {
    register long function __asm__("r8") = (long)child;
    register long parameter __asm__("r9") = (long)argument;
    long result;
    // syscall preserves every register but rax, rcx and r11: the child finds r8 and r9 intact.
    __asm__ volatile(
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        "xor %%ebp, %%ebp\n\t"
        "mov %%r9, %%rdi\n\t"
        "call *%%r8\n\t"
        "mov %%eax, %%edi\n\t"
        "mov $60, %%eax\n\t" // SYS_exit
        "syscall\n\t"
        "hlt\n\t"
        "1:\n\t"
        : "=a"(result)
        : "0"((long)SYS_clone3), "D"(args), "S"(sizeof *args), "r"(function), "r"(parameter)
        : "rcx", "r11", "memory");
    if (result < 0) {
        errno = (int)-result;
        return -1;
    }
    return result;
}
#else
static long clone3_call(struct clone_args *args, int (*child)(void *), void *argument) {
    (void)args, (void)child, (void)argument;
    errno = ENOSYS;
    return -1;
}
#endif

pid_t appd_spawn_shared(int (*child)(void *), void *argument) {
    return appd_spawn_shared_in(child, argument, -1);
}

pid_t appd_spawn_shared_in(int (*child)(void *), void *argument, int cgroup) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    size_t size = APPD_SHARED_STACK_SIZE + (size_t)page;
    char *stack = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                       -1, 0);
    if (stack == MAP_FAILED) return -1;
    // The lowest page stays PROT_NONE: an overflow faults instead of writing into the caller.
    if (mprotect(stack + page, APPD_SHARED_STACK_SIZE, PROT_READ | PROT_WRITE) != 0) {
        int saved = errno;
        munmap(stack, size);
        errno = saved;
        return -1;
    }
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    pid_t pid;
    if (cgroup < 0) {
        pid = clone(child, stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD, argument);
    } else {
        struct clone_args args = {
            .flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP,
            .exit_signal = SIGCHLD,
            .stack = (uint64_t)(uintptr_t)(stack + page),
            .stack_size = APPD_SHARED_STACK_SIZE,
            .cgroup = (uint64_t)cgroup,
        };
        pid = (pid_t)clone3_call(&args, child, argument);
    }
    int saved = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    // The child has exec'd (its own memory now) or exited: nothing runs on the stack any more.
    munmap(stack, size);
    errno = saved;
    return pid;
}

const char *appd_errno_name(int err) { return strerrorname_np(err); }
