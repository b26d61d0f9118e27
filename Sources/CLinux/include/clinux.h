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

/// renameat2(2) with RENAME_EXCHANGE (Swift's Glibc has no renameat2): a restore swaps the new
/// data container with the old in one step, so either is whole at any moment.
int appd_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
/// renameat2(2) with RENAME_NOREPLACE: publishing a container must never replace one.
int appd_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);

/// memfd_create(2) with MFD_CLOEXEC: an anonymous file for the profile and the seccomp BPF
/// handed to appd-exec, never visible in any filesystem.
int appd_memfd(const char *name);

/// statx(2)'s STATX_ATTR_MOUNT_ROOT for an open directory: 1 if it is the root of a mount
/// (a tree walk that removes must not cross into another filesystem or a bind mount), 0 if not
/// or the kernel cannot tell, -1 with errno on failure. Glibc's statx is behind _GNU_SOURCE.
int appd_is_mount_root(int fd);

/// openat2(2), which glibc does not wrap: opens the directory `path` beneath `dirfd` with the
/// kernel refusing any symlink (ELOOP), any mount crossing (EXDEV) and any step out of `dirfd`
/// (EXDEV) on the way. For walks of trees an app controls (the sizes `appd info` shows).
int appd_open_directory_beneath(int dirfd, const char *path);

#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the spawned launcher gets the
/// descriptors placed for it and nothing else, whatever lacks close-on-exec in the daemon.
int appd_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);

/// What the child of appd_spawn_in_cgroup does before it execs, as posix_spawn's attributes and
/// file actions would: every signal's action to the default and an empty mask, fd 0 from
/// /dev/null when `stdin_null`, each `from[i]` dup2'd to `to[i]` (every `from` above every
/// `to`), every fd from `close_from` up closed, setsid when `new_session`. The environment is
/// `envp`. `error` is the child's errno when it could not exec (it shares the caller's memory).
struct appd_spawn_request {
    const char *path;
    char *const *argv;
    char *const *envp;
    const int *from;
    const int *to;
    int count;
    int stdin_null;
    int new_session;
    int close_from;
    int error;
};

/// Spawns `request` as vfork + exec does, born in the cgroup v2 directory `cgroup` (an open
/// fd, CLONE_INTO_CGROUP): appd_spawn_shared_in. The pid, or -1 with errno: the clone's, or the
/// exec's (the child then exited 127 and is reaped here).
pid_t appd_spawn_in_cgroup(struct appd_spawn_request *request, int cgroup);

/// The calling thread gets an fd table of its own (unshare CLONE_FILES), holding only 0-2 and
/// `keep`: what the process opens later never reaches it. 0, or -1 with errno.
int appd_private_fd_table(int keep);

/// Names the calling thread (PR_SET_NAME: /proc/PID/task/TID/comm, top -H), at most 15 bytes.
int appd_set_thread_name(const char *name);

/// Sends `count` fds (at most 16) over a unix socket with one byte `tag`. 0, or -1 with errno.
int appd_send_fds(int socket, unsigned char tag, const int *fds, int count);

/// Receives one message of `appd_send_fds`: its tag, and up to `max` fds (close-on-exec) into
/// `fds`. The number of fds, or -1 with errno (EBADMSG: truncated, or more than `max`).
int appd_recv_fds(int socket, unsigned char *tag, int *fds, int max);

#endif

