#define _GNU_SOURCE
#include "clinux.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int appd_syncfs(int fd) { return syncfs(fd); }

ssize_t appd_copy_file_range(int fd_in, int fd_out, size_t len) {
    return copy_file_range(fd_in, NULL, fd_out, NULL, len, 0);
}

int appd_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE);
}

int appd_memfd(const char *name) { return memfd_create(name, MFD_CLOEXEC); }

int appd_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int appd_is_mount_root(int fd) {
    struct statx info;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &info) != 0) return -1;
    if (!(info.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) return 0;
    return (info.stx_attributes & STATX_ATTR_MOUNT_ROOT) ? 1 : 0;
}
