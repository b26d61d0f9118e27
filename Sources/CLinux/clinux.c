#define _GNU_SOURCE
#include "clinux.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/mman.h>
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
