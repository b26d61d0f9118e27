#ifndef APPD_CLINUX_HOST_H
#define APPD_CLINUX_HOST_H

#include <stdint.h>
#include <sys/types.h>

// Probes used by Sandbox's HostFeatures. Glibc has no wrappers for these system calls (or
// Swift's Glibc module does not export them), and Swift cannot call the variadic syscall(2)
// or prctl(2) directly. Each returns -1 with errno set on failure, like the system call.

/// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION): the Landlock ABI
/// version, or -1 with ENOSYS (not built) or EOPNOTSUPP (built, disabled at boot).
int appd_landlock_abi_version(void);

/// prctl(PR_GET_SECCOMP): 0, 1 or 2 (the calling thread's seccomp mode); -1/EINVAL without
/// CONFIG_SECCOMP.
int appd_prctl_get_seccomp(void);
/// prctl(PR_GET_MDWE): the process's memory-deny-write-execute flags, or -1 with EINVAL on a
/// kernel without them (before Linux 6.3).
int appd_prctl_get_mdwe(void);

/// pidfd_open(2) (Linux 5.3); -1/ENOSYS on older kernels.
int appd_pidfd_open(pid_t pid, unsigned int flags);
/// pidfd_send_signal(2) (Linux 5.1): `signal` to the process of `pidfd`, never to another that
/// took its pid; -1/ESRCH once it has ended.
int appd_pidfd_kill(int pidfd, int signal);
/// Reaps the child of `pidfd` if it has ended, without waiting (waitid(P_PIDFD, WEXITED |
/// WNOHANG), Linux 5.4): 1 with `*status` in waitpid(2)'s form, 0 while it runs, -1 with errno
/// (ECHILD: not a child of this process, or reaped already). Unlike waitpid(pid), it cannot
/// reap, or wait for, another process that took the pid.
int appd_pidfd_reap(int pidfd, int *status);

/// epoll(7) for the supervisor's one event thread (KernelEvents): sys/epoll.h is not in Swift's
/// Glibc module. A registration carries a 64-bit token, which appd_epoll_wait hands back with
/// the events the kernel reported.
#define APPD_EPOLLIN 0x001u
#define APPD_EPOLLPRI 0x002u
#define APPD_EPOLLERR 0x008u
#define APPD_EPOLLHUP 0x010u
#define APPD_EPOLLONESHOT (1u << 30)
/// epoll_create1(EPOLL_CLOEXEC).
int appd_epoll_create(void);
/// epoll_ctl(EPOLL_CTL_ADD) of `fd` for `events`, with `token`.
int appd_epoll_add(int epfd, int fd, uint32_t events, uint64_t token);
/// epoll_ctl(EPOLL_CTL_DEL).
int appd_epoll_remove(int epfd, int fd);
/// epoll_wait for at most `max` events (at most 64), `timeout_ms` as epoll_wait's; fills
/// `tokens` and `events`, returns how many (or -1 with errno).
int appd_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int max, int timeout_ms);

/// mallopt(3) for a long-lived daemon (malloc.h is not in Swift's Glibc module): a fixed
/// M_MMAP_THRESHOLD of `mmap_threshold` bytes (which turns off glibc's dynamic threshold) and
/// M_ARENA_MAX of `arenas`. Returns 1 when both were taken.
int appd_tune_malloc(int mmap_threshold, int arenas);


/// struct ucred as SO_PEERCRED fills it; glibc declares it only under _GNU_SOURCE, which
/// Swift's Glibc module does not set.
typedef struct {
    int32_t pid;
    uint32_t uid;
    uint32_t gid;
} appd_peer_credentials;

/// A pseudo-terminal pair for appd-oci's containers: `master` (to the engine) and `terminal`
/// (the app's 0, 1 and 2), both close-on-exec and not the caller's controlling terminal.
/// 0, or -1 with errno.
int appd_open_pty(int *master, int *terminal);

#endif
