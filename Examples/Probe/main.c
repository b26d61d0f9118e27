// probe: a hostile app for appd's sandbox tests. Installed and launched like any app, it tries
// what an app should not be able to do, and what it must still be able to do, and prints one
// line per attempt:
//
//   NAME: allowed
//   NAME: refused ERRNO          (the call failed with ERRNO)
//   NAME: killed SIGNAL          (the attempt, made in a child, died of SIGNAL)
//   NAME: value TEXT             (a fact: uid, Seccomp mode, ...)
//
// It never judges: the tests decide which outcome each name must have.
//
//   probe all                    every baseline check below
//   probe read PATH | write PATH | list PATH | exec PATH
//   probe connect HOST PORT | connect-abstract NAME | bind PORT | listen-unix
//   probe ptrace | jit | env | sleep SECONDS | exit CODE
//   probe home STEP...          makes files, links and folders in $HOME (home_files.c)
//   probe code                  tries to run unsigned code every way (attack_code.c)
//   probe ignore-term SECONDS   (sleeps with SIGTERM ignored: for the grace period)
//   probe spin SECONDS          (burns CPU: for suspend)
//   probe alloc MIB             (touches MIB of memory, then sleeps: for the OOM killer)
//   probe chatter LINES         (prints LINES numbered lines of 100 bytes, then sleeps 3 s: logs)
//   probe procs N SECONDS       (N processes in all, sleeping: for freezing many)
//   probe serve PORT            (a TCP server on 127.0.0.1:PORT, SO_REUSEADDR: prints `serving
//                               PORT`, then answers each connection with `pong N\n`, N counting
//                               from 1, and closes it: for services)
//   probe oom-loop N            (N times: forks a child that allocates until the OOM killer
//                               ends it, and waits: memory pressure and fork/exit churn)
//   probe lifecycle [OPTION...] speaks the lifecycle channel (docs/lifecycle.md) on the fd
//                               APPD_LIFECYCLE_FD names: hello, ready, then prints each message
//                               it gets as `lifecycle: event TYPE at NANOSECONDS JSON`. Options:
//       no-ready                never sends ready (the launch watchdog)
//       task SECONDS            on didEnterBackground begins a background task, ends it after SECONDS
//       end-on-expire           ends a task when it is warned of its expiry
//       spin                    a child process burns CPU (for the freezer)
//       alloc MIB               touches MIB of memory first (for jetsam)
//       alloc-after-ready MIB   touches MIB of memory once ready is sent (warned when it pushes
//                               the apps over the budget: its channel is open by then)
//       procs N                 N-1 sleeping child processes besides itself
//       garbage                 after ready, sends a datagram that is not JSON
//       fetch SECONDS           after ready, asks for background fetches every SECONDS, and
//                               answers each performFetch with newData
//       fetch-silent            ... and never answers performFetch (the deadline)
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <stddef.h>
#include <termios.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_BLUETOOTH
#define AF_BLUETOOTH 31
#endif
#define X32_SYSCALL_BIT 0x40000000

static const char *errno_name(int e) {
    switch (e) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EROFS: return "EROFS";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case EFAULT: return "EFAULT";
    case ENOTTY: return "ENOTTY";
    case EBADF: return "EBADF";
    case ETXTBSY: return "ETXTBSY";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ENETUNREACH: return "ENETUNREACH";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
    case EADDRINUSE: return "EADDRINUSE";
    case EEXIST: return "EEXIST";
    case EISDIR: return "EISDIR";
    case ENOTDIR: return "ENOTDIR";
    case EBUSY: return "EBUSY";
    case ESRCH: return "ESRCH";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case ENOMEM: return "ENOMEM";
    case EAGAIN: return "EAGAIN";
    default: return "EOTHER";
    }
}

/// Reports the result of a call that returns -1 on failure.
static void report(const char *name, long result) {
    if (result == -1) printf("%s: refused %s\n", name, errno_name(errno));
    else printf("%s: allowed\n", name);
    fflush(stdout);
}

/// Runs `attempt` in a child so a SIGSYS or a crash is reported, not fatal; the child exits 0
/// when the attempt succeeded and 100+errno when it failed.
static void in_child(const char *name, long (*attempt)(void)) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        errno = 0;
        long r = attempt();
        _exit(r == -1 ? 100 + (errno > 150 ? 150 : errno) : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) printf("%s: killed %s\n", name, sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
    else if (WEXITSTATUS(status) == 0) printf("%s: allowed\n", name);
    else printf("%s: refused %s\n", name, errno_name(WEXITSTATUS(status) - 100));
    fflush(stdout);
}

static long try_int80(void) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");  // i386 getpid
    if (ret < 0) { errno = (int)-ret; return -1; }
    return 0;
}
static long try_x32(void) { return syscall(X32_SYSCALL_BIT | SYS_getpid); }
static long try_clone_newns(void) {
    long r = syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
    if (r == 0) _exit(0);
    return r > 0 ? 0 : -1;
}
static long try_traceme(void) { return ptrace(PTRACE_TRACEME, 0, 0, 0); }
static long try_clone_thread(void) {
    // The plain fork glibc uses must stay allowed.
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid < 0) return -1;
    waitpid(pid, 0, 0);
    return 0;
}

static void value(const char *name, const char *text) {
    printf("%s: value %s\n", name, text);
    fflush(stdout);
}

static void status_fields(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) { report("proc-status", -1); return; }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        const char *keys[] = {"NoNewPrivs:", "Seccomp:", "CapEff:", "CapPrm:", "CapInh:", "CapBnd:", "CapAmb:", "Uid:", "Gid:", "Groups:"};
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
            size_t n = strlen(keys[i]);
            if (strncmp(line, keys[i], n) == 0) {
                char *v = line + n;
                while (*v == ' ' || *v == '\t') v++;
                v[strcspn(v, "\n")] = 0;
                for (char *p = v; *p; p++) if (*p == '\t') *p = ' ';
                char name[64];
                snprintf(name, sizeof name, "status-%.*s", (int)(n - 1), keys[i]);
                value(name, *v ? v : "-");
            }
        }
    }
    fclose(f);
}

static void list_dir(const char *name, const char *path) {
    DIR *d = opendir(path);
    if (!d) { report(name, -1); return; }
    char out[4096] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        if (strlen(out) + strlen(e->d_name) + 2 < sizeof out) { strcat(out, e->d_name); strcat(out, ","); }
    }
    closedir(d);
    value(name, *out ? out : "-");
}

static void processes(void) {
    DIR *d = opendir("/proc");
    if (!d) { report("processes", -1); return; }
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) if (e->d_name[0] >= '0' && e->d_name[0] <= '9') count++;
    closedir(d);
    char text[32];
    snprintf(text, sizeof text, "%d", count);
    value("process-count", text);
    snprintf(text, sizeof text, "%d", getpid());
    value("pid", text);
}

static void open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) { report("fds", -1); return; }
    char out[1024] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d)) continue;
        char link[256] = "", target[300];
        snprintf(target, sizeof target, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(target, link, sizeof link - 1);
        if (n > 0) link[n] = 0;
        snprintf(target, sizeof target, "%d=%s,", fd, link);
        if (strlen(out) + strlen(target) < sizeof out) strcat(out, target);
    }
    closedir(d);
    value("extra-fds", *out ? out : "none");
}

static void *thread_main(void *arg) { return arg; }

static int write_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    int ok = write(fd, "x", 1) == 1;
    close(fd);
    if (!ok) return -1;
    unlink(path);
    return 0;
}

static void baseline(void) {
    char text[512];
    snprintf(text, sizeof text, "%d", getuid()); value("uid", text);
    snprintf(text, sizeof text, "%d", getgid()); value("gid", text);
    status_fields();
    processes();
    struct utsname u; uname(&u); value("hostname", u.nodename);
    value("cwd", getcwd(text, sizeof text) ? text : "?");
    open_fds();
    list_dir("root-entries", "/");
    list_dir("dev-entries", "/dev");

    // Terminal injection, also with high bits set in the request (compared on the low 32 bits).
    char c = 'x';
    report("ioctl-TIOCSTI", syscall(SYS_ioctl, 0, (unsigned long)TIOCSTI, &c));
    report("ioctl-TIOCSTI-high", syscall(SYS_ioctl, 0, (unsigned long)TIOCSTI | (1UL << 32), &c));
    char sub = 0;
    report("ioctl-TIOCLINUX", syscall(SYS_ioctl, 0, (unsigned long)TIOCLINUX, &sub));
    report("ioctl-TIOCLINUX-high", syscall(SYS_ioctl, 0, (unsigned long)TIOCLINUX | (1UL << 32), &sub));
    int ldisc = 0;  // N_TTY: the terminal's own discipline, which any tty owner may set
    report("ioctl-TIOCSETD", syscall(SYS_ioctl, 0, (unsigned long)TIOCSETD, &ldisc));
    report("ioctl-TIOCSETD-high", syscall(SYS_ioctl, 0, (unsigned long)TIOCSETD | (1UL << 32), &ldisc));

    report("clone3", syscall(SYS_clone3, NULL, 0));
    in_child("clone-newns", try_clone_newns);
    report("unshare-user", unshare(CLONE_NEWUSER));
    report("unshare-net", unshare(CLONE_NEWNET));
    report("unshare-ns", unshare(CLONE_NEWNS));
    report("mount", syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, 0));
    report("umount", syscall(SYS_umount2, "/proc", 2 /* MNT_DETACH */));
    report("pivot_root", syscall(SYS_pivot_root, "/", "/"));
    report("chroot", syscall(SYS_chroot, "/"));
    report("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/", 0));
    report("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
    report("move_mount", syscall(SYS_move_mount, -1, "", -1, "/", 0));
    report("fspick", syscall(SYS_fspick, AT_FDCWD, "/", 0));
    report("mount_setattr", syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, NULL, 0));
    report("setns", syscall(SYS_setns, 0, 0));
    // In a child: a process that became traced stops at its next signal or exec.
    in_child("ptrace-traceme", try_traceme);
    report("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
    report("bpf", syscall(SYS_bpf, 0, NULL, 0));
    report("userfaultfd", syscall(SYS_userfaultfd, 0));
    report("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
    report("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
    report("add_key", syscall(SYS_add_key, "user", "x", "y", 1, -2));
    report("request_key", syscall(SYS_request_key, "user", "x", NULL, 0));
    report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
    report("init_module", syscall(SYS_init_module, NULL, 0, ""));
    report("finit_module", syscall(SYS_finit_module, -1, "", 0));
    report("acct", syscall(SYS_acct, NULL));
    report("swapon", syscall(SYS_swapon, "/nonexistent", 0));
    report("syslog", syscall(SYS_syslog, 3, text, 10));
    report("reboot", syscall(SYS_reboot, 0, 0, 0, NULL));
    report("personality-linux32", personality(PER_LINUX32));
    report("personality-query", personality(0xffffffff));
    personality(PER_LINUX);  // undo a change that was allowed, for the checks below

    void *wx = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    report("mmap-wx", wx == MAP_FAILED ? -1 : 0);
    void *rw = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    report("mmap-rw", rw == MAP_FAILED ? -1 : 0);
    if (rw != MAP_FAILED) report("mprotect-wx", mprotect(rw, 4096, PROT_READ | PROT_WRITE | PROT_EXEC));

    report("socket-packet", socket(AF_PACKET, SOCK_RAW, 0));
    report("socket-vsock", socket(AF_VSOCK, SOCK_STREAM, 0));
    report("socket-bluetooth", socket(AF_BLUETOOTH, SOCK_RAW, 0));
    report("socket-netlink-audit", socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT));
    report("socket-netlink-route", socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
    in_child("abi-i386", try_int80);
    in_child("abi-x32", try_x32);

    struct rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    if (limit.rlim_max != RLIM_INFINITY) limit.rlim_max += 1;
    report("raise-hard-rlimit", setrlimit(RLIMIT_NOFILE, &limit));
    const char *home = getenv("HOME");
    snprintf(text, sizeof text, "%s/tmp/probe-dev", home ? home : "/tmp");
    report("mknod-device", mknod(text, S_IFCHR | 0600, makedev(1, 3)));
    report("write-proc-self-exe", open("/proc/self/exe", O_WRONLY));
    report("read-etc-shadow", open("/etc/shadow", O_RDONLY));

    // What must keep working.
    in_child("fork", try_clone_thread);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) { execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL); _exit(127); }
    int status = 0;
    waitpid(pid, &status, 0);
    report("exec-sh", WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : -1);
    pthread_t thread;
    report("thread", pthread_create(&thread, NULL, thread_main, NULL) == 0 && pthread_join(thread, NULL) == 0 ? 0 : -1);
    int pair[2];
    report("socketpair-unix", socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
    report("socket-inet", socket(AF_INET, SOCK_DGRAM, 0));
    char random[16];
    report("getrandom", getrandom(random, sizeof random, 0) == sizeof random ? 0 : -1);
    report("memfd", memfd_create("probe", MFD_CLOEXEC));
    snprintf(text, sizeof text, "%s/Documents/probe.txt", home ? home : "/nonexistent");
    report("write-documents", write_file(text));
    report("write-tmp", write_file("/tmp/probe.txt"));
    report("write-var-tmp", write_file("/var/tmp/probe.txt"));
    report("write-root", write_file("/probe.txt"));
    report("write-etc", write_file("/etc/probe.txt"));
    report("write-dev-shm", write_file("/dev/shm/probe.txt"));
    const char *bundle = getenv("APPD_BUNDLE_PATH");
    if (bundle) {
        snprintf(text, sizeof text, "%s/probe.txt", bundle);
        report("write-bundle", write_file(text));
    }
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) { self[n] = 0; report("write-own-executable", open(self, O_WRONLY)); }
}


static void connect_tcp(const char *host, int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) { report("connect", -1); return; }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &addr.sin_addr);
    report("connect", connect(fd, (struct sockaddr *)&addr, sizeof addr));
}

static void connect_abstract(const char *name) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path + 1, name, sizeof addr.sun_path - 2);
    report("connect-abstract", connect(fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name)));
}

static void bind_tcp(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    long r = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    report("bind", r);
    if (r == 0) report("listen", listen(fd, 1));
}

static int serve_tcp(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 64) != 0) {
        report("serve", -1);
        return 1;
    }
    printf("serving %d\n", port);
    fflush(stdout);
    for (unsigned long served = 1;; served++) {
        int client = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (client < 0) {
            if (errno == EINTR) continue;
            report("accept", -1);
            return 1;
        }
        char line[64];
        int length = snprintf(line, sizeof line, "pong %lu\n", served);
        (void)!write(client, line, (size_t)length);
        close(client);
    }
}

static long try_ptrace(void) {
    pid_t child = fork();
    if (child == 0) { pause(); _exit(0); }
    long r = ptrace(PTRACE_ATTACH, child, 0, 0);
    int saved = errno;
    if (r == 0) { waitpid(child, NULL, 0); ptrace(PTRACE_DETACH, child, 0, 0); }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    errno = saved;
    return r;
}

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void send_json(int fd, const char *json) {
    if (send(fd, json, strlen(json), MSG_NOSIGNAL) < 0) report("lifecycle-send", -1);
}

/// The value of a string field in one of the daemon's small JSON objects (no escapes in them).
static void json_string(const char *json, const char *key, char *out, size_t size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    out[0] = 0;
    const char *at = strstr(json, pattern);
    if (!at) return;
    at += strlen(pattern);
    size_t n = 0;
    while (at[n] && at[n] != '"' && n + 1 < size) { out[n] = at[n]; n++; }
    out[n] = 0;
}

static long json_number(const char *json, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = strstr(json, pattern);
    return at ? strtol(at + strlen(pattern), NULL, 10) : -1;
}

static void forked_children(int count, int spin) {
    for (int i = 0; i < count; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(3);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (spin) { volatile unsigned long n = 0; for (;;) n++; }
            for (;;) pause();
        }
    }
}

static volatile sig_atomic_t lifecycle_terminating;
static void lifecycle_on_term(int signo) { (void)signo; lifecycle_terminating = 1; }

static int lifecycle(int argc, char **argv) {
    int no_ready = 0, end_on_expire = 0, spin = 0, garbage = 0, procs = 1, fetch_silent = 0;
    double fetch_seconds = -1;
    size_t late_alloc = 0;
    double task_seconds = -1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "no-ready")) no_ready = 1;
        else if (!strcmp(argv[i], "end-on-expire")) end_on_expire = 1;
        else if (!strcmp(argv[i], "spin")) spin = 1;
        else if (!strcmp(argv[i], "garbage")) garbage = 1;
        else if (!strcmp(argv[i], "fetch-silent")) fetch_silent = 1;
        else if (!strcmp(argv[i], "fetch") && i + 1 < argc) fetch_seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "task") && i + 1 < argc) task_seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "procs") && i + 1 < argc) procs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "alloc-after-ready") && i + 1 < argc) late_alloc = (size_t)atoi(argv[++i]) << 20;
        else if (!strcmp(argv[i], "alloc") && i + 1 < argc) {
            size_t total = (size_t)atoi(argv[++i]) << 20;
            char *memory = malloc(total);
            for (size_t j = 0; memory && j < total; j += 4096) memory[j] = 1;
        } else { fprintf(stderr, "probe: unknown lifecycle option %s\n", argv[i]); return 2; }
    }
    const char *named = getenv("APPD_LIFECYCLE_FD");
    if (!named) { value("lifecycle", "no APPD_LIFECYCLE_FD"); return 1; }
    int fd = atoi(named);
    if (spin) forked_children(1, 1);
    if (procs > 1) forked_children(procs - 1, 0);
    send_json(fd, "{\"type\":\"hello\",\"version\":1}");
    if (!no_ready) send_json(fd, "{\"type\":\"ready\"}");
    if (garbage) send_json(fd, "this is not JSON");
    if (fetch_seconds >= 0) {
        char message[128];
        snprintf(message, sizeof message,
                 "{\"type\":\"setMinimumBackgroundFetchInterval\",\"interval\":%.3f}", fetch_seconds);
        send_json(fd, message);
    }
    value("lifecycle", no_ready ? "hello" : "ready");
    if (late_alloc) {
        char *memory = malloc(late_alloc);
        for (size_t j = 0; memory && j < late_alloc; j += 4096) memory[j] = 1;
    }
    // SIGTERM comes right after willTerminate: read what the channel holds first, as an app
    // on AppRuntime does, then end by the signal (no SA_RESTART: poll returns EINTR).
    struct sigaction on_term = {.sa_handler = lifecycle_on_term};
    sigemptyset(&on_term.sa_mask);
    sigaction(SIGTERM, &on_term, NULL);
    long held = 0;            // the background task we hold, 0 for none
    long long end_at = 0;     // when we end it (ns), 0 for never
    char buffer[65536 + 1], type[64];
    for (;;) {
        int timeout = -1;
        if (end_at) { long long left = (end_at - now_ns() + 999999) / 1000000; timeout = left < 0 ? 0 : (int)left; }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = lifecycle_terminating ? 0 : poll(&pfd, 1, timeout);
        if (lifecycle_terminating) {
            ssize_t n;
            while ((n = recv(fd, buffer, sizeof buffer - 1, MSG_DONTWAIT)) > 0) {
                buffer[n] = 0;
                json_string(buffer, "type", type, sizeof type);
                printf("lifecycle: event %s at %lld %s\n", type, now_ns(), buffer);
            }
            fflush(stdout);
            signal(SIGTERM, SIG_DFL);
            raise(SIGTERM);
        }
        if (ready == 0) {
            // poll's millisecond timeout may wake us a little early: only act once it is time.
            if (held && end_at && now_ns() >= end_at) {
                char message[96];
                snprintf(message, sizeof message, "{\"type\":\"endBackgroundTask\",\"task\":%ld}", held);
                // Printed first: the daemon may freeze us (and our output relay, in our cgroup)
                // as soon as it reads the message.
                printf("lifecycle: value ended task %ld\n", held);
                send_json(fd, message);
                held = 0;
                end_at = 0;
            }
            continue;
        }
        if (ready < 0) continue;
        ssize_t n = recv(fd, buffer, sizeof buffer - 1, 0);
        if (n <= 0) { value("lifecycle", "channel closed"); for (;;) pause(); }
        buffer[n] = 0;
        json_string(buffer, "type", type, sizeof type);
        printf("lifecycle: event %s at %lld %s\n", type, now_ns(), buffer);
        if (!strcmp(type, "didEnterBackground") && task_seconds >= 0 && !held) {
            send_json(fd, "{\"type\":\"beginBackgroundTask\",\"name\":\"save\",\"ref\":1}");
        } else if (!strcmp(type, "backgroundTaskBegan")) {
            held = json_number(buffer, "task");
            if (held > 0) end_at = now_ns() + (long long)(task_seconds * 1e9);
            else held = 0;
        } else if (!strcmp(type, "backgroundTaskWillExpire") && end_on_expire && held) {
            end_at = now_ns();
        } else if (!strcmp(type, "performFetch") && !fetch_silent) {
            char message[128];
            snprintf(message, sizeof message,
                     "{\"type\":\"fetchCompleted\",\"fetch\":%ld,\"result\":\"newData\"}",
                     json_number(buffer, "fetch"));
            // Printed first: the daemon freezes us as soon as it reads the answer.
            printf("lifecycle: value fetched %ld\n", json_number(buffer, "fetch"));
            fflush(stdout);
            send_json(fd, message);
        }
    }
}

int attack_network(int argc, char **argv);  // attack_network.c

/// cat PATH: each line of the file (at most 64 lines), then `cat: value end`; a file that
/// cannot be opened is `cat: refused ERRNO`.
static int cat_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) { report("cat", -1); return 1; }
    char line[512];
    for (int n = 0; n < 64 && fgets(line, sizeof line, f); n++) {
        line[strcspn(line, "\n")] = 0;
        value("cat", line);
    }
    fclose(f);
    value("cat", "end");
    return 0;
}

/// resolve NAME: getaddrinfo through the sandbox's /etc/hosts and /etc/resolv.conf; each
/// address as `resolve: value ADDR`, or `resolve: failed MESSAGE`.
static int resolve_name(const char *name) {
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *found = NULL;
    int error = getaddrinfo(name, NULL, &hints, &found);
    if (error) {
        printf("resolve: failed %s\n", gai_strerror(error));
        return 1;
    }
    for (struct addrinfo *a = found; a; a = a->ai_next) {
        char text[64];
        inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, text, sizeof text);
        value("resolve", text);
    }
    freeaddrinfo(found);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    // A copy of the probe run as `true` (attack_code.c): the program ran, and succeeds.
    if (argc > 0 && !strcmp(argv[0], "true")) return 0;
    const char *mode = argc > 1 ? argv[1] : "all";
    if (!strcmp(mode, "all")) baseline();
    else if (!strncmp(mode, "disk-", 5)) { int attack_disk(int, char **); return attack_disk(argc, argv); }
    else if (!strcmp(mode, "code")) { int attack_code(int, char **); return attack_code(argc, argv); }
    else if (!strcmp(mode, "read") && argc > 2) report("read", open(argv[2], O_RDONLY));
    else if (!strcmp(mode, "write") && argc > 2) report("write", write_file(argv[2]));
    else if (!strcmp(mode, "cat") && argc > 2) return cat_file(argv[2]);
    else if (!strcmp(mode, "hostname")) {
        // What the uts namespace says, and what the name resolves to through /etc/hosts.
        struct utsname u;
        uname(&u);
        value("hostname", u.nodename);
        return resolve_name(u.nodename);
    } else if (!strcmp(mode, "resolve") && argc > 2) return resolve_name(argv[2]);
    else if (!strcmp(mode, "list") && argc > 2) list_dir("list", argv[2]);
    else if (!strcmp(mode, "exec") && argc > 2) {
        execv(argv[2], argv + 2);
        report("exec", -1);
    }
    else if (!strcmp(mode, "exec-hostile-name")) {
        // A script whose name holds what would drive a terminal: ESC (clear the screen), C1 CSI
        // and OSC, and U+202E; the kernel's record of the refused exec names the path, and
        // appctl denials and events must show it escaped. In $HOME (written here), where the
        // noexec mount refuses it before any layer that records; or in DIR (argv[2], a
        // read-only exception path holding such a file), where Landlock refuses it and records.
        const char *dir = argc > 2 ? argv[2] : (getenv("HOME") ? getenv("HOME") : "/nonexistent");
        char path[4096];
        snprintf(path, sizeof path, "%s/run\x1b[2J\xc2\x9b" "8m\xc2\x9d" "\xe2\x80\xae" "exe.txt", dir);
        if (argc <= 2) {
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
            if (fd >= 0) {
                const char script[] = "#!/bin/sh\nexit 0\n";
                if (write(fd, script, sizeof script - 1) < 0) perror("write");
                close(fd);
            }
        }
        char *args[] = {path, NULL};
        execv(path, args);
        report("exec-hostile-name", -1);
    }
    else if (!strcmp(mode, "serve-any") || !strcmp(mode, "fetch")) {
        int pod_network(int, char **);  // pod_network.c
        int code = pod_network(argc, argv);
        if (code >= 0) return code;
    }
    else if (!strcmp(mode, "connect") && argc > 3) connect_tcp(argv[2], atoi(argv[3]));
    else if (!strcmp(mode, "connect-abstract") && argc > 2) connect_abstract(argv[2]);
    else if (!strcmp(mode, "bind") && argc > 2) bind_tcp(atoi(argv[2]));
    // serve PORT (a pong server, ServiceTests); serve PORT SECONDS is attack_network.c's.
    else if (!strcmp(mode, "serve") && argc == 3) return serve_tcp(atoi(argv[2]));
    else if (!strcmp(mode, "ptrace")) report("ptrace-attach", try_ptrace());
    else if (!strcmp(mode, "denials")) {
        // Each forbidden action once, for the denial log (docs/denials.md). Landlock refuses
        // listing the sandbox's root and writing a file of /proc it may only read; seccomp
        // refuses mount, ptrace and a W+X mapping. /etc/shadow is not in the sandbox at all
        // and / is a read-only mount: those fail before any layer has to refuse.
        report("read-etc-shadow", open("/etc/shadow", O_RDONLY));
        report("write-root", write_file("/probe-denial.txt"));
        DIR *root = opendir("/");
        report("list-root", root ? 0 : -1);
        if (root) closedir(root);
        report("write-proc-comm", open("/proc/self/comm", O_WRONLY | O_CLOEXEC));
        report("mount", syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, 0));
        report("ptrace-attach", try_ptrace());
        void *wx = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        report("mmap-wx", wx == MAP_FAILED ? -1 : 0);
        // What every program does, which is no denial: a thread (glibc tries clone3 first,
        // which the filter answers ENOSYS, then clone).
        pthread_t thread;
        report("thread", pthread_create(&thread, NULL, thread_main, NULL) == 0 && pthread_join(thread, NULL) == 0 ? 0 : -1);
        if (argc > 2) sleep(atoi(argv[2]));
    } else if (!strcmp(mode, "deny-loop") && argc > 2) {
        // A flood: two different forbidden accesses in turn (so no two in a row are the same)
        // as fast as it can for N seconds.
        time_t end = time(NULL) + atoi(argv[2]);
        unsigned long n = 0;
        while (time(NULL) < end) {
            DIR *root = opendir("/");
            if (root) closedir(root);
            int fd = open("/proc/self/comm", O_WRONLY | O_CLOEXEC);
            if (fd >= 0) close(fd);
            n += 2;
        }
        printf("deny-loop: value %lu\n", n);
    }
    else if (!strcmp(mode, "jit")) {
        void *wx = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        report("mmap-wx", wx == MAP_FAILED ? -1 : 0);
    } else if (!strcmp(mode, "env")) {
        extern char **environ;
        for (char **e = environ; *e; e++) printf("env: value %s\n", *e);
    } else if (!strcmp(mode, "sleep") && argc > 2) sleep(atoi(argv[2]));
    else if (!strcmp(mode, "exit") && argc > 2) return atoi(argv[2]);
    else if (!strcmp(mode, "ignore-term") && argc > 2) {
        signal(SIGTERM, SIG_IGN);
        printf("ignore-term: value ready\n");
        fflush(stdout);
        sleep(atoi(argv[2]));
    } else if (!strcmp(mode, "spin") && argc > 2) {
        time_t end = time(NULL) + atoi(argv[2]);
        volatile unsigned long n = 0;
        while (time(NULL) < end) n++;
    } else if (!strcmp(mode, "chatter") && argc > 2) {
        for (int i = 0, n = atoi(argv[2]); i < n; i++) printf("chatter line %07d %.80s\n", i, "................................................................................");
        fflush(stdout);
        sleep(3);
    } else if (!strcmp(mode, "alloc") && argc > 2) {
        size_t total = (size_t)atoi(argv[2]) << 20;
        char *memory = malloc(total);
        for (size_t i = 0; memory && i < total; i += 4096) memory[i] = 1;
        printf("alloc: value %s MiB touched\n", argv[2]);
        fflush(stdout);
        sleep(30);
    }
    else if (!strcmp(mode, "oom-loop") && argc > 2) {
        int killed = 0;
        for (int i = 0, n = atoi(argv[2]); i < n; i++) {
            pid_t child = fork();
            if (child == 0) {
                for (;;) {
                    char *block = malloc(1 << 20);
                    if (!block) _exit(1);
                    memset(block, 1, 1 << 20);
                }
            }
            int status = 0;
            if (child > 0 && waitpid(child, &status, 0) == child && WIFSIGNALED(status)) killed++;
        }
        printf("oom-loop: value %d killed\n", killed);
        fflush(stdout);
    }
    else if (!strcmp(mode, "procs") && argc > 3) {
        forked_children(atoi(argv[2]) - 1, 0);
        value("procs", "ready");
        sleep(atoi(argv[3]));
    } else if (!strcmp(mode, "lifecycle")) return lifecycle(argc, argv);
    else if (attack_network(argc, argv) == 0) return 0;
    else if (!strncmp(mode, "output-", 7)) { int attack_output(int, char **); return attack_output(argc, argv); }
    else if (!strcmp(mode, "deep-tree")) { int attack_tree(int, char **); return attack_tree(argc, argv); }
    else if (!strcmp(mode, "home")) { int home_files(int, char **); return home_files(argc, argv); }
    else if (!strcmp(mode, "attack-channel")) { int attack_channel(int, char **); return attack_channel(argc, argv); }
    else { fprintf(stderr, "probe: unknown mode %s\n", mode); return 2; }
    return 0;
}
