#define _GNU_SOURCE
#include "clinux_files.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

int appd_open_beneath(int dirfd, const char *path, int flags, unsigned mode) {
    struct open_how how = {
        .flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC),
        .mode = (flags & O_CREAT) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS,
    };
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

int appd_open_in_root(int dirfd, const char *path) {
    struct open_how how = {
        .flags = (unsigned long long)(O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK),
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

ssize_t appd_write_as(int fd, const void *buffer, size_t length, uid_t uid, gid_t gid) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct saved[2], lowered[2];
    if (syscall(SYS_capget, &header, saved) != 0) return -1;
    lowered[0] = saved[0];
    lowered[1] = saved[1];
    lowered[CAP_SYS_RESOURCE / 32].effective &= ~(1u << (CAP_SYS_RESOURCE % 32));
    if (syscall(SYS_capset, &header, lowered) != 0) return -1;
    // setfsuid/setfsgid return the previous value and cannot report failure: read it back.
    int old_gid = setfsgid(gid), old_uid = setfsuid(uid);
    ssize_t written = -1;
    int failure = EPERM;
    if ((uid_t)setfsuid((uid_t)-1) == uid && (gid_t)setfsgid((gid_t)-1) == gid) {
        written = write(fd, buffer, length);
        failure = errno;
    }
    // Back to root's fsuid first (which gives back the filesystem capabilities), then the
    // saved set; neither can fail: what is raised is in the permitted set.
    (void)setfsuid((uid_t)old_uid);
    (void)setfsgid((gid_t)old_gid);
    (void)syscall(SYS_capset, &header, saved);
    errno = failure;
    return written;
}

int appd_open_no_symlinks(const char *path, int flags) {
    struct open_how how = {
        .flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC),
        .resolve = RESOLVE_NO_SYMLINKS,
    };
    return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
}

ssize_t appd_getxattr(const char *path, const char *name, void *value, size_t size) {
    return getxattr(path, name, value, size);
}

int appd_setxattr(const char *path, const char *name, const void *value, size_t size) {
    return setxattr(path, name, value, size, 0);
}

int appd_o_path(void) { return O_PATH; }
