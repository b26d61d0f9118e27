// Unsigned-code attacks (issue 24 §4): ways an app could run code it was not signed with.
// Output in probe's format (main.c): `NAME: allowed` (the code ran and returned 42, or the
// program ran), `NAME: refused ERRNO`, `NAME: value X`.
//
//   probe code       every attempt below, each on its own:
//     code-mdwe              value: what prctl(PR_GET_MDWE) says (-1: the kernel has none)
//     code-mprotect-rx       an anonymous page written, then mprotect RW -> RX, and called
//     code-shared-anon-rx    mmap(MAP_SHARED | MAP_ANONYMOUS, PROT_EXEC): an aliasable code page
//     code-memfd-create      memfd_create
//     code-memfd-mmap-rx     code written into a memfd, mapped RX (MAP_PRIVATE), and called
//     code-memfd-execveat    the probe copied into a memfd, execveat(fd, "", AT_EMPTY_PATH) (as
//                            `true`: it exits 0 at once)
//     code-home-mmap-exec    code written to a file in $HOME, mapped PROT_EXEC, and called
//     code-tmp-exec          the probe copied to $TMPDIR, chmod 755, execve'd (as `true`)
//     code-shm-mmap-exec     code written to a file in /dev/shm, mapped PROT_EXEC, and called
//     code-host-sh           the host's /bin/sh -c 'exit 0' (allowed only where Info.plist's
//                            AppdHostExecutables names it)
//     code-host-python       a script the app wrote to $TMPDIR, run by the host's /usr/bin/python3
//     code-loader-python     the same script through the dynamic loader: ld.so /usr/bin/python3
//                            SCRIPT (the loader maps python3 as it would a library)
// An attempt whose first step fails (no memfd) is refused with that step's errno.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// A function that returns 42.
#if defined(__x86_64__)
static const unsigned char code[] = {0xB8, 0x2A, 0x00, 0x00, 0x00, 0xC3};  // mov eax, 42; ret
#elif defined(__aarch64__)
static const unsigned char code[] = {0x40, 0x05, 0x80, 0x52, 0xC0, 0x03, 0x5F, 0xD6};  // mov w0, #42; ret
#else
#error "probe: no code sample for this architecture"
#endif

static void refused(const char *name, int error) {
    printf("%s: refused %s\n", name, strerrorname_np(error) ? strerrorname_np(error) : "unknown");
    fflush(stdout);
}

/// Calls the code at `page`: allowed if it returned 42.
static void call(const char *name, void *page) {
    int (*function)(void) = (int (*)(void))page;
    if (function() == 42) printf("%s: allowed\n", name);
    else printf("%s: value wrong result\n", name);
    fflush(stdout);
}

static int write_all(int fd, const void *bytes, size_t count) {
    const char *at = bytes;
    while (count > 0) {
        ssize_t written = write(fd, at, count);
        if (written < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        at += written;
        count -= (size_t)written;
    }
    return 0;
}

static int copy_file(const char *from, int to) {
    int source = open(from, O_RDONLY | O_CLOEXEC);
    if (source < 0) return -1;
    char buffer[65536];
    ssize_t count;
    int result = 0;
    while ((count = read(source, buffer, sizeof buffer)) > 0) {
        if (write_all(to, buffer, (size_t)count) != 0) { result = -1; break; }
    }
    if (count < 0) result = -1;
    close(source);
    return result;
}

/// Maps `fd` PROT_READ|PROT_EXEC (private) and calls it.
static void map_and_call(const char *name, int fd) {
    void *page = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (page == MAP_FAILED) { refused(name, errno); return; }
    call(name, page);
    munmap(page, 4096);
}

/// A child runs `run(argument)`, which execs /usr/bin/true or returns the errno it failed with.
/// The exec's errno comes back on a close-on-exec pipe: a program that ran and failed (ld.so
/// exits 127 when it cannot load what it was given) is not taken for a refused exec.
static void exec_in_child(const char *name, int (*run)(const void *), const void *argument) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) { refused(name, errno); return; }
    pid_t child = fork();
    if (child < 0) { refused(name, errno); close(fds[0]); close(fds[1]); return; }
    if (child == 0) {
        int error = run(argument);
        (void)!write(fds[1], &error, sizeof error);
        _exit(127);
    }
    close(fds[1]);
    int error = 0;
    ssize_t got;
    while ((got = read(fds[0], &error, sizeof error)) < 0 && errno == EINTR) {}
    close(fds[0]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    if (got == (ssize_t)sizeof error) { refused(name, error); return; }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) printf("%s: allowed\n", name);
    else printf("%s: value status %d\n", name, status);
    fflush(stdout);
}

static char *const true_argv[] = {"true", NULL};
static char *const empty_envp[] = {NULL};

static int execveat_fd(const void *argument) {
    int fd = *(const int *)argument;
    syscall(SYS_execveat, fd, "", true_argv, empty_envp, AT_EMPTY_PATH);
    return errno;
}

static int execve_path(const void *argument) {
    execve((const char *)argument, true_argv, empty_envp);
    return errno;
}

static void mprotect_rx(void) {
    const char *name = "code-mprotect-rx";
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) { refused(name, errno); return; }
    memcpy(page, code, sizeof code);
    if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) refused(name, errno);
    else call(name, page);
    munmap(page, 4096);
}

static void shared_anon_rx(void) {
    void *page = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) { refused("code-shared-anon-rx", errno); return; }
    printf("code-shared-anon-rx: allowed\n");
    fflush(stdout);
    munmap(page, 4096);
}

static void memfd_attempts(void) {
    int fd = memfd_create("probe", MFD_CLOEXEC);
    if (fd < 0) {
        int error = errno;
        refused("code-memfd-create", error);
        refused("code-memfd-mmap-rx", error);
        refused("code-memfd-execveat", error);
        return;
    }
    printf("code-memfd-create: allowed\n");
    if (write_all(fd, code, sizeof code) != 0 || ftruncate(fd, 4096) != 0) refused("code-memfd-mmap-rx", errno);
    else map_and_call("code-memfd-mmap-rx", fd);
    close(fd);

    int program = memfd_create("probe-true", MFD_CLOEXEC);
    if (program < 0) { refused("code-memfd-execveat", errno); return; }
    if (copy_file("/proc/self/exe", program) != 0) refused("code-memfd-execveat", errno);
    else exec_in_child("code-memfd-execveat", execveat_fd, &program);
    close(program);
}

/// Writes `bytes` to `path` (created 0755) and returns an fd open for reading, or -1.
static int written_file(const char *path, const void *bytes, size_t count, const char *copy_from) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (fd < 0) return -1;
    int failed = copy_from ? copy_file(copy_from, fd) : write_all(fd, bytes, count);
    if (!failed && !copy_from) failed = ftruncate(fd, 4096);
    if (failed) { int error = errno; close(fd); errno = error; return -1; }
    return fd;
}

static void file_attempts(void) {
    const char *home = getenv("HOME");
    const char *tmp = getenv("TMPDIR");
    char path[4096];

    snprintf(path, sizeof path, "%s/probe-code.bin", home ? home : "/nonexistent");
    int fd = written_file(path, code, sizeof code, NULL);
    if (fd < 0) refused("code-home-mmap-exec", errno);
    else { map_and_call("code-home-mmap-exec", fd); close(fd); }

    snprintf(path, sizeof path, "%s%sprobe-true", tmp ? tmp : "/nonexistent/",
        tmp && tmp[0] && tmp[strlen(tmp) - 1] == '/' ? "" : "/");
    fd = written_file(path, NULL, 0, "/proc/self/exe");
    if (fd < 0) refused("code-tmp-exec", errno);
    else {
        close(fd);  // ETXTBSY otherwise
        exec_in_child("code-tmp-exec", execve_path, path);
    }

    fd = written_file("/dev/shm/probe-code.bin", code, sizeof code, NULL);
    if (fd < 0) refused("code-shm-mmap-exec", errno);
    else { map_and_call("code-shm-mmap-exec", fd); close(fd); }
}

/// argv for `exec_argv`: the program first.
static int exec_argv(const void *argument) {
    char *const *argv = (char *const *)argument;
    execve(argv[0], argv, empty_envp);
    return errno;
}

static void host_attempts(void) {
    static char *sh_argv[] = {"/bin/sh", "-c", "exit 0", NULL};
    exec_in_child("code-host-sh", exec_argv, sh_argv);

    const char *tmp = getenv("TMPDIR");
    static char script[4096];
    snprintf(script, sizeof script, "%s/probe-script.py", tmp ? tmp : "/nonexistent");
    static const char source[] = "import sys\nsys.exit(0)\n";
    int fd = open(script, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0 && write_all(fd, source, sizeof source - 1)) { close(fd); fd = -1; }
    if (fd < 0) { refused("code-host-python", errno); refused("code-loader-python", errno); return; }
    close(fd);
    static char *python_argv[] = {"/usr/bin/python3", script, NULL};
    exec_in_child("code-host-python", exec_argv, python_argv);
#if defined(__x86_64__)
    static char *loader_argv[] = {"/lib64/ld-linux-x86-64.so.2", "/usr/bin/python3", script, NULL};
#else
    static char *loader_argv[] = {"/lib/ld-linux-aarch64.so.1", "/usr/bin/python3", script, NULL};
#endif
    exec_in_child("code-loader-python", exec_argv, loader_argv);
}

int attack_code(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("code-mdwe: value %d\n", prctl(66 /* PR_GET_MDWE */, 0, 0, 0, 0));
    fflush(stdout);
    mprotect_rx();
    shared_anon_rx();
    memfd_attempts();
    file_attempts();
    host_attempts();
    return 0;
}
