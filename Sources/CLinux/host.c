#define _GNU_SOURCE
#include "clinux_host.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// Debian 12's headers predate some of these numbers; they are the same on every architecture
// that uses the generic syscall table (x86_64, aarch64).
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#define APPD_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)

int appd_landlock_abi_version(void) {
    return (int)syscall(SYS_landlock_create_ruleset, NULL, 0, APPD_LANDLOCK_CREATE_RULESET_VERSION);
}

int appd_prctl_get_seccomp(void) { return prctl(PR_GET_SECCOMP, 0, 0, 0, 0); }
int appd_prctl_get_mdwe(void) { return prctl(66 /* PR_GET_MDWE */, 0, 0, 0, 0); }

int appd_pidfd_open(pid_t pid, unsigned int flags) {
    return (int)syscall(SYS_pidfd_open, pid, flags);
}

int appd_pidfd_kill(int pidfd, int signal) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, signal, NULL, 0);
}

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

int appd_pidfd_reap(int pidfd, int *status) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    int result;
    do {
        result = waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED | WNOHANG);
    } while (result < 0 && errno == EINTR);
    if (result < 0) return -1;
    if (info.si_pid == 0) return 0;
    switch (info.si_code) {
    case CLD_EXITED: *status = (info.si_status & 0xff) << 8; break;
    case CLD_KILLED: *status = info.si_status & 0x7f; break;
    case CLD_DUMPED: *status = (info.si_status & 0x7f) | 0x80; break;
    default: *status = 0; break;
    }
    return 1;
}

int appd_tune_malloc(int mmap_threshold, int arenas) {
    return mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 && mallopt(M_ARENA_MAX, arenas) == 1;
}

int appd_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int appd_epoll_add(int epfd, int fd, uint32_t events, uint64_t token) {
    struct epoll_event event = {.events = events, .data.u64 = token};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
}

int appd_epoll_remove(int epfd, int fd) {
    struct epoll_event event = {0};
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &event);
}

int appd_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event ready[64];
    if (max > 64) max = 64;
    int count = epoll_wait(epfd, ready, max, timeout_ms);
    for (int i = 0; i < count; i++) {
        tokens[i] = ready[i].data.u64;
        events[i] = ready[i].events;
    }
    return count;
}

int appd_open_pty(int *master, int *terminal) {
    int fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    char name[128];
    if (grantpt(fd) != 0 || unlockpt(fd) != 0 || ptsname_r(fd, name, sizeof name) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    *master = fd;
    *terminal = slave;
    return 0;
}
