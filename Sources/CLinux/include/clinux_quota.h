#ifndef APPD_CLINUX_QUOTA_H
#define APPD_CLINUX_QUOTA_H

#include <stdint.h>

// Project quotas (ext4, xfs): the kernel-enforced disk limit of a data container
// (docs/state-root.md). Glibc has no quotactl_fd(2) wrapper (Linux 5.14), Swift cannot call
// the variadic syscall(2) or ioctl(2), and <linux/quota.h>/<linux/fs.h> structs are simplest
// filled in C. Each returns 0 (or a state) on success, -errno on failure.

/// Project quota state of the filesystem holding `fd`: 2 limits enforced, 1 usage accounted
/// but limits not enforced (ext4 mounted without prjquota), or -errno: -ENOSYS (the
/// filesystem has no quotas enabled, or the kernel no quotactl_fd), -ESRCH (project quotas
/// off on this filesystem), -EINVAL/-EOPNOTSUPP (the filesystem cannot have them).
int appd_project_quota_state(int fd);

/// Sets project id `projid` and the inherit flag on the directory `dirfd` (FS_IOC_FSSETXATTR),
/// so everything created beneath it is charged to that project.
int appd_set_project(int dirfd, uint32_t projid);

/// The project id of `fd` (FS_IOC_FSGETXATTR) in *projid, and 1 if it has the inherit flag.
int appd_get_project(int fd, uint32_t *projid);

/// Hard and soft block limit of project `projid` on the filesystem of `fd`, in bytes (rounded
/// up to KiB); 0 removes the limit.
int appd_set_project_limit(int fd, uint32_t projid, uint64_t bytes);

/// Bytes used by project `projid`, and its hard limit in bytes (0: none).
int appd_get_project_usage(int fd, uint32_t projid, uint64_t *used, uint64_t *limit);

#endif
