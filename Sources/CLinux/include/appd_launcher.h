#ifndef APPD_LAUNCHER_H
#define APPD_LAUNCHER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// Shims for appd-exec, the sandbox launcher. Swift's Glibc module leaves out everything glibc
// hides behind _GNU_SOURCE (unshare, setresuid, close_range, strerrorname_np, the CLONE_ and
// ST_ constants), has no prctl/syscall() (variadic), and knows nothing of the syscalls without
// glibc wrappers (pivot_root, mount_setattr, landlock_*, seccomp, capset, pidfd_open). Each
// wrapper returns what the syscall returns and leaves errno set.

// unshare(2) flags, copied from <linux/sched.h> so that this header needs no _GNU_SOURCE.
#define APPD_CLONE_NEWNS 0x00020000
#define APPD_CLONE_NEWCGROUP 0x02000000
#define APPD_CLONE_NEWUTS 0x04000000
#define APPD_CLONE_NEWIPC 0x08000000
#define APPD_CLONE_NEWUSER 0x10000000
#define APPD_CLONE_NEWPID 0x20000000
#define APPD_CLONE_NEWNET 0x40000000

int appd_unshare(int flags);

/// The name of the memfd the output relay locks (flock, exclusive) from each read of the app's
/// output until the bytes are in the log, and the daemon finds through /proc/<relay>/fd and
/// locks shared to wait for that (docs/app-output.md). A file of the relay's own: the app never
/// holds it, so it cannot stall the relay by holding a lock, as it could on the pipe.
#define APPD_OUTPUT_LOCK_NAME "appd-output-lock"

/// setns(2): joins the namespace `fd` names; `type` (a CLONE_NEW* flag) must match it.
int appd_setns(int fd, int type);

/// pivot_root(2): no glibc wrapper.
int appd_pivot_root(const char *new_root, const char *put_old);

/// mount_setattr(2) with AT_RECURSIVE: sets `attr_set` (MOUNT_ATTR_*) on the mount at `path`
/// and every mount below it, never clearing a flag, so the kernel's locked flags stay as they
/// are. No glibc wrapper in Debian 12.
int appd_mount_setattr_recursive(const char *path, uint64_t attr_set);
#define APPD_MOUNT_ATTR_RDONLY 0x00000001ULL
#define APPD_MOUNT_ATTR_NOSUID 0x00000002ULL
#define APPD_MOUNT_ATTR_NODEV 0x00000004ULL
#define APPD_MOUNT_ATTR_NOEXEC 0x00000008ULL

/// The MS_* flags a remount of `path` must keep because the kernel may have locked them
/// (nosuid, nodev, noexec, the atime flags), read with statvfs(2). The ST_* constants are
/// _GNU_SOURCE-only. Returns -1 with errno on failure.
long appd_locked_mount_flags(const char *path);

/// The same for a mount fd (an open_tree clone, attached or not), read with fstatvfs(2).
long appd_locked_mount_flags_fd(int fd);

/// open_tree(2) with OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC: a detached copy of the mount at
/// `path` (resolved from the caller's root and working directory, trailing symlink followed),
/// with every mount below it when `recursive`. The copy stays valid whatever happens to the
/// caller's mount tree afterwards. -1 with errno ENOSYS before Linux 5.2.
int appd_open_tree_clone(const char *path, int recursive);

/// move_mount(2) of the detached tree `fd` onto `target` (a trailing symlink followed, as
/// mount(2) does).
int appd_move_mount_onto(int fd, const char *target);

/// mount_setattr(2) on the detached tree `fd` (an open_tree clone never attached), with
/// AT_RECURSIVE: MOUNT_ATTR_IDMAP onto the user namespace `userns_fd`, plus `attr_set`. An
/// on-disk id k is then seen as the id the namespace maps k to, and a file created through the
/// mount by that id is stored as k (Linux 5.12; EINVAL where the filesystem cannot be idmapped:
/// overlayfs among them).
int appd_mount_setattr_idmap(int fd, int userns_fd, uint64_t attr_set);

/// setfsgid(2) then setfsuid(2), checked by reading them back: 0, or -1 with EPERM.
int appd_setfsids(uint32_t uid, uint32_t gid);

/// statfs(2)'s f_type (the filesystem's magic number) of `path`, or -1 with errno.
long long appd_filesystem_type(const char *path);

/// A plain container's user namespace, made without entering it (for an idmapped mount, and for
/// the app process to join with setns): ids 0..<count onto the caller's uid.. and gid.. . A
/// forked child unshares it, the caller writes
/// its maps through /proc/<pid> (the caller must see the child in its procfs: call it before
/// entering a new pid namespace) and opens its ns file, and the child exits. Returns the
/// namespace's fd (O_CLOEXEC), or -1 with errno.
int appd_mapping_userns(uint32_t uid, uint32_t gid, uint32_t count);

/// Brings the loopback interface of the current net namespace up (SIOCGIFFLAGS/SIOCSIFFLAGS):
/// struct ifreq's union is not usable from Swift.
int appd_loopback_up(void);

/// prctl(2) is variadic in glibc, which Swift cannot call.
int appd_set_no_new_privs(void);
int appd_set_pdeathsig(int signo);
/// prctl(PR_SET_DUMPABLE): a change of uid in a process sharing our memory clears it.
int appd_set_dumpable(int dumpable);
int appd_set_child_subreaper(void);
int appd_capbset_drop(int cap);
/// PR_CAPBSET_READ: 1 or 0, or -1 with EINVAL past the kernel's last capability.
int appd_capbset_read(int cap);
int appd_cap_ambient_clear_all(void);
/// prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN) (Linux 6.3): from now on, in this process, its
/// children and what it execs, no mapping gains PROT_EXEC it did not have, and none is writable
/// and executable at once. Debian 12's headers predate the constants. -1 with EINVAL before 6.3.
int appd_set_mdwe_refuse_exec_gain(void);

/// capset(2) with empty effective, permitted and inheritable sets (no glibc wrapper).
int appd_capset_zero(void);
/// capset(2) with these sets, one bit per capability number (a plain container's exact sets).
int appd_capset_masks(uint64_t effective, uint64_t permitted, uint64_t inheritable);
/// PR_CAP_AMBIENT_RAISE of one capability (it must be permitted and inheritable already).
int appd_cap_ambient_raise(int cap);
/// PR_SET_KEEPCAPS: keep the permitted set across the next change away from uid 0.
int appd_set_keepcaps(int keep);

/// setresuid/setresgid are _GNU_SOURCE-only. Both set the real, effective and saved id.
int appd_setresuid(uid_t uid);
int appd_setresgid(gid_t gid);

/// open(2) with O_PATH|O_CLOEXEC (a handle for a Landlock rule); O_PATH is _GNU_SOURCE-only.
int appd_open_path(const char *path);

/// pipe2(2) with O_CLOEXEC; pipe2 is _GNU_SOURCE-only.
int appd_pipe_cloexec(int fds[2]);

/// close_range(2) is _GNU_SOURCE-only.
int appd_close_range(unsigned int first, unsigned int last);

/// The RLIMIT_* number for a prlimit(1) resource name (`nofile`, `as`...), or -1. The numbers
/// differ between architectures, so C maps them rather than Swift.
int appd_rlimit_resource(const char *name);
int appd_setrlimit(int resource, uint64_t soft, uint64_t hard);
/// getrlimit(2) of an RLIMIT_* number; 0, or -1 with errno.
int appd_getrlimit(int resource, uint64_t *soft, uint64_t *hard);
#define APPD_RLIM_INFINITY 0xFFFFFFFFFFFFFFFFULL

/// Landlock (linux/landlock.h in Debian 12 stops at ABI 2; the definitions up to ABI 7 are
/// written out in launcher.c). `appd_landlock_abi` returns the kernel's ABI version, or -1 with
/// errno (ENOSYS: not built in, EOPNOTSUPP: disabled at boot).
int appd_landlock_abi(void);
/// Creates a ruleset handling the given rights. `abi` decides how much of the attribute struct
/// is passed, so that older kernels do not see fields they do not know.
int appd_landlock_create_ruleset(
    uint64_t handled_fs, uint64_t handled_net, uint64_t scoped, int abi);
int appd_landlock_add_path_rule(int ruleset_fd, int parent_fd, uint64_t allowed_access);
int appd_landlock_add_port_rule(int ruleset_fd, uint64_t port, uint64_t allowed_access);
/// `flags`: APPD_LANDLOCK_RESTRICT_SELF_* (ABI 7; 0 before).
int appd_landlock_restrict_self(int ruleset_fd, uint32_t flags);
/// ABI 7: audit the domain's denials after execve too (by default the kernel logs only those
/// of the program that called landlock_restrict_self, i.e. the launcher, never the app).
#define APPD_LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (1U << 1)

#define APPD_LANDLOCK_ACCESS_FS_EXECUTE (1ULL << 0)
#define APPD_LANDLOCK_ACCESS_FS_WRITE_FILE (1ULL << 1)
#define APPD_LANDLOCK_ACCESS_FS_READ_FILE (1ULL << 2)
#define APPD_LANDLOCK_ACCESS_FS_READ_DIR (1ULL << 3)
#define APPD_LANDLOCK_ACCESS_FS_REMOVE_DIR (1ULL << 4)
#define APPD_LANDLOCK_ACCESS_FS_REMOVE_FILE (1ULL << 5)
#define APPD_LANDLOCK_ACCESS_FS_MAKE_CHAR (1ULL << 6)
#define APPD_LANDLOCK_ACCESS_FS_MAKE_DIR (1ULL << 7)
#define APPD_LANDLOCK_ACCESS_FS_MAKE_REG (1ULL << 8)
#define APPD_LANDLOCK_ACCESS_FS_MAKE_SOCK (1ULL << 9)
#define APPD_LANDLOCK_ACCESS_FS_MAKE_FIFO (1ULL << 10)
#define APPD_LANDLOCK_ACCESS_FS_MAKE_BLOCK (1ULL << 11)
#define APPD_LANDLOCK_ACCESS_FS_MAKE_SYM (1ULL << 12)
#define APPD_LANDLOCK_ACCESS_FS_REFER (1ULL << 13)  // ABI 2
#define APPD_LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  // ABI 3
#define APPD_LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)  // ABI 5
#define APPD_LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)  // ABI 4
#define APPD_LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)  // ABI 4
#define APPD_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)  // ABI 6
#define APPD_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)  // ABI 6

/// seccomp(2) SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_LOG, without TSYNC (the launcher is single-threaded) with a
/// raw `struct sock_filter` array of `count` instructions. No glibc wrapper.
int appd_seccomp_set_filter(const void *instructions, unsigned short count, int log_denials);

/// A non-blocking check whether the process of a pidfd (appd_pidfd_open, clinux_host.h) has
/// exited: 1 exited, 0 running, -1 error.
int appd_pidfd_exited(int pidfd);

/// Starts `child(argument)` in a new process that shares the caller's memory, as glibc's
/// posix_spawn does: clone(CLONE_VM | CLONE_VFORK | SIGCHLD) on a stack of its own (mapped here,
/// with a guard page, unmapped on return). The caller is suspended until the child execs or
/// exits, so nothing of the caller runs while the two share the address space; the child must
/// end in execve or _exit, never return. No page table is copied and no page is copied on write,
/// in either process. Every signal is blocked around the clone (the child starts with all of
/// them blocked; it sets its own mask), the caller's mask is restored after. Returns the child's
/// pid, or -1 with errno set. In C because Swift cannot switch stacks, and a child on the
/// caller's stack would overwrite the frames the caller returns to.
pid_t appd_spawn_shared(int (*child)(void *), void *argument);

/// appd_spawn_shared with the child born in the cgroup v2 directory `cgroup` (an open fd):
/// clone3 with CLONE_INTO_CGROUP (Linux 5.7). Being born there spares the cgroup.procs write
/// that moves a process, which waits for an RCU grace period whenever no move came just before
/// it (10-20 ms measured here). `cgroup` < 0: as appd_spawn_shared. -1 with errno ENOSYS on an
/// architecture without the clone3 code here (only x86_64 has it), EINVAL on a kernel without
/// CLONE_INTO_CGROUP.
pid_t appd_spawn_shared_in(int (*child)(void *), void *argument, int cgroup);

/// The launcher's helpers, each confined by appd_confine_helper once its privileged work is done.
#define APPD_HELPER_LAUNCHER 0
#define APPD_HELPER_INIT 1
#define APPD_HELPER_RELAY 2

struct appd_helper_confinement {
    int kind;
    /// The highest capability number the kernel knows (/proc/sys/kernel/cap_last_cap).
    int last_capability;
    /// The one process the helper may signal (the launcher: PID 1; PID 1: the app), or 0.
    pid_t peer;
    /// The relay's log folder: the only directory it may open or rename files in. -1 otherwise.
    int directory_fd;
    /// PID 1 of an app: its effective uid becomes the app's (to signal it), real and saved
    /// stay 0. -1: unchanged.
    long long effective_uid;
    /// PID 1 of a plain container with a user namespace: a pidfd of the app, whose user
    /// namespace PID 1 moves into, keeping only CAP_KILL there. -1: none.
    int user_namespace_pidfd;
    /// PID 1 with --init-signals: it may open files for reading (/proc/PID/status).
    int read_only_opens;
    /// Re-armed after a change of ids (which clears it), then `parent_pidfd` (>= 0) is
    /// checked: -1 with ESRCH if the parent died meanwhile. 0: none.
    int pdeath_signal;
    int parent_pidfd;
};

/// Gives up the host's privileges for good: empties the bounding and ambient sets, locks the
/// securebits (uid 0 regains nothing), for PID 1 takes the app's effective uid (or moves into
/// the container's user namespace), clears every capability set, sets no_new_privs, for the
/// relay restricts its files to its log folder with Landlock (where the kernel has it), and
/// installs the helper's own seccomp allowlist (docs/launcher-protocol.md, "The helpers").
/// 0, or -1 with errno.
int appd_confine_helper(const struct appd_helper_confinement *confinement);

/// fork(2) with the child born in the cgroup v2 directory `cgroup` (an open fd): clone3 with
/// CLONE_INTO_CGROUP (Linux 5.7), no stack or shared memory, so the child returns 0 here as
/// from fork. For a single-threaded caller only: glibc's fork bookkeeping (atfork handlers, the
/// thread's cached tid) is skipped, and the child must not rely on it (the output relay does
/// not). -1 with errno (ENOSYS, EINVAL before 5.7: the caller forks and moves the child).
pid_t appd_fork_into_cgroup(int cgroup);

/// strerrorname_np(3) is _GNU_SOURCE-only: "ENOENT" for ENOENT, NULL if unknown.
const char *appd_errno_name(int err);

#endif
