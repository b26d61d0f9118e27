#ifndef APPD_CLINUX_H
#define APPD_CLINUX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// Swift's Glibc module does not export these (they sit behind _GNU_SOURCE in glibc's headers),
// so each gets a tiny prefixed wrapper here.

/// syncfs(2): flush the whole filesystem holding `fd`. One call instead of an fsync per file
/// when publishing an install of thousands of files.
int appd_syncfs(int fd);

/// copy_file_range(2) with NULL offsets: copies in the kernel, no userspace buffer.
ssize_t appd_copy_file_range(int fd_in, int fd_out, size_t len);

/// renameat2(2) with RENAME_NOREPLACE: publishing a container must never replace one.
int appd_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);

/// memfd_create(2) with MFD_CLOEXEC: an anonymous file for the profile and the seccomp BPF
/// handed to appd-exec, never visible in any filesystem.
int appd_memfd(const char *name);

/// statx(2)'s STATX_ATTR_MOUNT_ROOT for an open directory: 1 if it is the root of a mount
/// (a tree walk that removes must not cross into another filesystem or a bind mount), 0 if not
/// or the kernel cannot tell, -1 with errno on failure. Glibc's statx is behind _GNU_SOURCE.
int appd_is_mount_root(int fd);

#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the spawned launcher gets the
/// descriptors placed for it and nothing else, whatever lacks close-on-exec in the daemon.
int appd_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);

#endif

