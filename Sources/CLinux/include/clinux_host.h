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

/// pidfd_open(2) (Linux 5.3); -1/ENOSYS on older kernels.
int appd_pidfd_open(pid_t pid, unsigned int flags);

/// mallopt(3) for a long-lived daemon (malloc.h is not in Swift's Glibc module): a fixed
/// M_MMAP_THRESHOLD of `mmap_threshold` bytes (which turns off glibc's dynamic threshold) and
/// M_ARENA_MAX of `arenas`. Returns 1 when both were taken.
int appd_tune_malloc(int mmap_threshold, int arenas);

#endif

/// struct ucred as SO_PEERCRED fills it; glibc declares it only under _GNU_SOURCE, which
/// Swift's Glibc module does not set.
typedef struct {
    int32_t pid;
    uint32_t uid;
    uint32_t gid;
} appd_peer_credentials;
