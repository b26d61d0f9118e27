#define _GNU_SOURCE
#include "clinux.h"
#include "appd_launcher.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>
#include <linux/openat2.h>

int appd_syncfs(int fd) { return syncfs(fd); }

ssize_t appd_copy_file_range(int fd_in, int fd_out, size_t len) {
    return copy_file_range(fd_in, NULL, fd_out, NULL, len, 0);
}

int appd_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE);
}

int appd_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_EXCHANGE);
}

int appd_memfd(const char *name) { return memfd_create(name, MFD_CLOEXEC); }

int appd_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

// The child of appd_spawn_in_cgroup: it shares the caller's memory until it execs, so it only
// makes system calls and writes `error`.
static int spawn_child(void *argument) {
    struct appd_spawn_request *request = argument;
    // Handlers point into the caller's code: every action back to the default (the child has
    // its own table: no CLONE_SIGHAND), then the mask the caller's clone blocked everything in.
    struct sigaction action = {.sa_handler = SIG_DFL};
    for (int signal = 1; signal < NSIG; signal++) {
        if (signal == SIGKILL || signal == SIGSTOP) continue;
        (void)sigaction(signal, &action, NULL);
    }
    sigset_t none;
    sigemptyset(&none);
    if (request->new_session && setsid() < 0) goto failed;
    if (request->stdin_null) {
        int null = open("/dev/null", O_RDONLY);
        if (null < 0) goto failed;
        if (null != 0) {
            if (dup2(null, 0) < 0) goto failed;
            close(null);
        }
    }
    for (int i = 0; i < request->count; i++) {
        // dup2 clears close-on-exec on the copy; the originals stay close-on-exec.
        if (dup2(request->from[i], request->to[i]) < 0) goto failed;
    }
    if (close_range((unsigned)request->close_from, ~0U, 0) != 0) goto failed;
    if (sigprocmask(SIG_SETMASK, &none, NULL) != 0) goto failed;
    execve(request->path, request->argv, request->envp);
failed:
    request->error = errno;
    _exit(127);
}

pid_t appd_spawn_in_cgroup(struct appd_spawn_request *request, int cgroup) {
    request->error = 0;
    pid_t pid = appd_spawn_shared_in(spawn_child, request, cgroup);
    if (pid < 0) return -1;
    if (request->error != 0) {
        // It exited; it is ours to reap, and the exec's error is the answer.
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        errno = request->error;
        return -1;
    }
    return pid;
}

int appd_private_fd_table(int keep) {
    if (unshare(CLONE_FILES) != 0) return -1;
    if (keep > 3 && close_range(3, (unsigned)keep - 1, 0) != 0) return -1;
    return close_range(keep < 3 ? 3 : (unsigned)keep + 1, ~0U, 0);
}

int appd_set_thread_name(const char *name) { return prctl(PR_SET_NAME, name, 0, 0, 0); }

#define APPD_MAX_PASSED_FDS 16

int appd_send_fds(int socket, unsigned char tag, const int *fds, int count) {
    if (count < 0 || count > APPD_MAX_PASSED_FDS) { errno = EINVAL; return -1; }
    union {
        char buffer[CMSG_SPACE(sizeof(int) * APPD_MAX_PASSED_FDS)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = &tag, .iov_len = 1};
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1};
    if (count > 0) {
        message.msg_control = control.buffer;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
        memcpy(CMSG_DATA(header), fds, sizeof(int) * (size_t)count);
    }
    ssize_t sent;
    do { sent = sendmsg(socket, &message, MSG_NOSIGNAL); } while (sent < 0 && errno == EINTR);
    return sent == 1 ? 0 : -1;
}

int appd_recv_fds(int socket, unsigned char *tag, int *fds, int max) {
    union {
        char buffer[CMSG_SPACE(sizeof(int) * APPD_MAX_PASSED_FDS)];
        struct cmsghdr align;
    } control;
    struct iovec iov = {.iov_base = tag, .iov_len = 1};
    struct msghdr message = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buffer, .msg_controllen = sizeof control.buffer};
    ssize_t received;
    do { received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC); } while (received < 0 && errno == EINTR);
    if (received < 0) return -1;
    if (received == 0) { errno = ECONNRESET; return -1; }
    int count = 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        int n = (int)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *data = (int *)CMSG_DATA(header);
        for (int i = 0; i < n; i++) {
            if (count < max) fds[count++] = data[i];
            else close(data[i]);
        }
        if (n > max) { for (int i = 0; i < count; i++) close(fds[i]); errno = EBADMSG; return -1; }
    }
    if (message.msg_flags & MSG_CTRUNC) {
        for (int i = 0; i < count; i++) close(fds[i]);
        errno = EBADMSG;
        return -1;
    }
    return count;
}

int appd_open_directory_beneath(int dirfd, const char *path) {
    struct open_how how = {
        .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS,
    };
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

int appd_is_mount_root(int fd) {
    struct statx info;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &info) != 0) return -1;
    if (!(info.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) return 0;
    return (info.stx_attributes & STATX_ATTR_MOUNT_ROOT) ? 1 : 0;
}
