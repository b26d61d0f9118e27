#ifndef APPD_CLINUX_FILES_H
#define APPD_CLINUX_FILES_H

#include <stddef.h>
#include <sys/types.h>

// What the daemon needs to do file work inside a tree an app controls (file sharing, the
// emptying of Caches): Swift's Glibc has neither openat2 nor capset.

/// openat2(2) of `path` beneath `dirfd` with `flags` and `mode`, the kernel refusing any
/// symlink (ELOOP), any mount crossing (EXDEV) and any step out of `dirfd` (EXDEV) on the way,
/// the last component included. A file of an app's Documents is opened with this and nothing
/// else, so an app that swaps a folder for a link while the daemon works cannot steer it.
int appd_open_beneath(int dirfd, const char *path, int flags, unsigned mode);

/// openat2(2) of `path` read-only with `dirfd` as its root (RESOLVE_IN_ROOT): absolute symlinks
/// and `..` stay inside it, as they would for a process chrooted there. How `appd verify
/// --root DIR` finds another host's libraries in its filesystem, whose symlinks (/lib ->
/// usr/lib) name that host's paths, not ours.
int appd_open_in_root(int dirfd, const char *path);

/// write(2) charged as the app's own write: the calling thread's fsuid and fsgid become `uid`
/// and `gid` and CAP_SYS_RESOURCE leaves its effective set for the call (both are per thread;
/// the daemon's other threads keep theirs), so a project quota binds the daemon's write (root
/// passes it with CAP_SYS_RESOURCE) and so do ext4's blocks reserved for root (granted to
/// fsuid 0 whatever the capabilities). -1 with errno (the write's, or the first failing
/// step's) on failure.
ssize_t appd_write_as(int fd, const void *buffer, size_t length, uid_t uid, gid_t gid);

/// openat2(2) of the absolute `path` with `flags` (O_CLOEXEC and O_NOFOLLOW added), the kernel
/// refusing a symbolic link anywhere on the way (ELOOP), magic links included. appd-oci opens a
/// container's root filesystem and host folders with it: what is checked is what is named, and
/// the fd is what the launcher is then given.
int appd_open_no_symlinks(const char *path, int flags);

/// getxattr(2) and setxattr(2) (sys/xattr.h is not in Swift's Glibc module): appd-oci marks
/// each container's cgroup with its id and kind.
ssize_t appd_getxattr(const char *path, const char *name, void *value, size_t size);
int appd_setxattr(const char *path, const char *name, const void *value, size_t size);

/// O_PATH, _GNU_SOURCE-only (not in Swift's Glibc module).
int appd_o_path(void);

#endif
