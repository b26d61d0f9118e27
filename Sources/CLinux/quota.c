#define _GNU_SOURCE
#include <errno.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/quota.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "include/clinux_quota.h"

#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

// quotactl_fd(2) takes an fd on the filesystem instead of the path of its block device,
// which a loop device, a device-mapper volume or a bind mount would make hard to find.
static int quotactl_fd(int fd, int cmd, uint32_t id, void *addr) {
    long r = syscall(SYS_quotactl_fd, fd, (unsigned int)QCMD(cmd, PRJQUOTA), (unsigned int)id, addr);
    return r < 0 ? -errno : 0;
}

int appd_project_quota_state(int fd) {
    struct fs_quota_statv state;
    memset(&state, 0, sizeof state);
    state.qs_version = FS_QSTATV_VERSION1;
    int r = quotactl_fd(fd, Q_XGETQSTATV, 0, &state);
    if (r < 0) return r;
    if (state.qs_flags & FS_QUOTA_PDQ_ENFD) return 2;
    if (state.qs_flags & FS_QUOTA_PDQ_ACCT) return 1;
    return -ESRCH;
}

int appd_set_project(int dirfd, uint32_t projid) {
    struct fsxattr attr;
    if (ioctl(dirfd, FS_IOC_FSGETXATTR, &attr) != 0) return -errno;
    attr.fsx_projid = projid;
    attr.fsx_xflags |= FS_XFLAG_PROJINHERIT;
    if (ioctl(dirfd, FS_IOC_FSSETXATTR, &attr) != 0) return -errno;
    return 0;
}

int appd_get_project(int fd, uint32_t *projid) {
    struct fsxattr attr;
    if (ioctl(fd, FS_IOC_FSGETXATTR, &attr) != 0) return -errno;
    *projid = attr.fsx_projid;
    return (attr.fsx_xflags & FS_XFLAG_PROJINHERIT) ? 1 : 0;
}

int appd_set_project_limit(int fd, uint32_t projid, uint64_t bytes) {
    struct if_dqblk limits;
    memset(&limits, 0, sizeof limits);
    // if_dqblk counts blocks of QIF_DQBLKSIZE (1 KiB).
    uint64_t blocks = bytes / QIF_DQBLKSIZE + (bytes % QIF_DQBLKSIZE != 0);
    limits.dqb_bhardlimit = blocks;
    limits.dqb_bsoftlimit = blocks;
    limits.dqb_valid = QIF_BLIMITS;
    return quotactl_fd(fd, Q_SETQUOTA, projid, &limits);
}

int appd_get_project_usage(int fd, uint32_t projid, uint64_t *used, uint64_t *limit) {
    struct if_dqblk usage;
    memset(&usage, 0, sizeof usage);
    int r = quotactl_fd(fd, Q_GETQUOTA, projid, &usage);
    if (r < 0) return r;
    *used = usage.dqb_curspace;
    *limit = usage.dqb_bhardlimit * QIF_DQBLKSIZE;
    return 0;
}
