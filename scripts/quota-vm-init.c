// /init of a throwaway VM (scripts/quota-vm-check): checks CLinux's project-quota shim
// (Sources/CLinux/quota.c, linked in) on a stock Debian kernel, which has CONFIG_QUOTA where
// the development machine's kernel does not. It loads the modules ext4 with quotas needs,
// mounts an ext4 image (made on the host with -O quota,project) from a loop device with
// prjquota, and does what appd does for a data container: project id + inherit flag, a hard
// limit, then writes as an unprivileged uid until EDQUOT. Prints `quota-vm: NAME: RESULT`
// lines and `quota-vm: done` and powers off.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../Sources/CLinux/include/clinux_quota.h"

static int failures = 0;
static void check(const char *name, int ok, const char *detail) {
    printf("quota-vm: %s: %s%s%s\n", name, ok ? "ok" : "FAILED", detail ? " " : "", detail ? detail : "");
    if (!ok) failures++;
    fflush(stdout);
}

static void load(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int r = fd < 0 ? -1 : (int)syscall(SYS_finit_module, fd, "", 0);
    if (r != 0 && errno != EEXIST) printf("quota-vm: load %s: %s\n", path, strerror(errno));
    if (fd >= 0) close(fd);
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

// As an app would: its own uid, no capabilities (root's CAP_SYS_RESOURCE ignores limits).
static long long fill_as(uid_t uid, const char *path, int *err) {
    int pipefd[2];
    if (pipe(pipefd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(1);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        long long total = 0;
        int e = 0;
        static char chunk[64 << 10];
        memset(chunk, 'x', sizeof chunk);
        if (fd < 0) e = errno;
        else for (;;) {
            ssize_t n = write(fd, chunk, sizeof chunk);
            if (n <= 0) { e = errno; break; }
            total += n;
        }
        if (fd >= 0 && fsync(fd) != 0 && !e) e = errno;
        long long out[2] = {total, e};
        write(pipefd[1], out, sizeof out);
        _exit(0);
    }
    close(pipefd[1]);
    long long in[2] = {-1, 0};
    read(pipefd[0], in, sizeof in);
    close(pipefd[0]);
    waitpid(pid, NULL, 0);
    *err = (int)in[1];
    return in[0];
}

int main(void) {
    mkdir("/proc", 0755); mount("proc", "/proc", "proc", 0, NULL);
    mkdir("/dev", 0755); mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
    const char *modules[] = {"crc16", "mbcache", "crc32c_generic", "jbd2", "quota_tree", "quota_v2", "ext4", "loop"};
    for (size_t i = 0; i < sizeof modules / sizeof *modules; i++) {
        char path[64];
        snprintf(path, sizeof path, "/modules/%s.ko", modules[i]);
        load(path);
    }
    int control = open("/dev/loop-control", O_RDWR);
    int n = control < 0 ? -1 : ioctl(control, LOOP_CTL_GET_FREE);
    char loopdev[32];
    snprintf(loopdev, sizeof loopdev, "/dev/loop%d", n);
    int loop = open(loopdev, O_RDWR), image = open("/fs.img", O_RDWR);
    struct loop_config config = {.fd = (unsigned)image};
    check("loop device", loop >= 0 && image >= 0 && ioctl(loop, LOOP_CONFIGURE, &config) == 0, loopdev);
    mkdir("/mnt", 0755);
    int mounted = mount(loopdev, "/mnt", "ext4", 0, "prjquota") == 0;
    check("mount ext4 -o prjquota", mounted, mounted ? NULL : strerror(errno));
    if (!mounted) goto out;

    int root = open("/mnt", O_RDONLY | O_DIRECTORY);
    check("quota state: enforced (2)", appd_project_quota_state(root) == 2, NULL);
    mkdir("/mnt/data", 0700);
    chown("/mnt/data", 4242, 4242);
    int data = open("/mnt/data", O_RDONLY | O_DIRECTORY);
    double t0 = now_us();
    int set = appd_set_project(data, 4242);
    int limited = appd_set_project_limit(root, 4242, 4 << 20);
    double t1 = now_us();
    char cost[64];
    snprintf(cost, sizeof cost, "(%.0f us for project id + inherit + limit)", t1 - t0);
    check("set project 4242 + inherit on the container", set == 0, NULL);
    check("limit project 4242 to 4M", limited == 0, cost);
    mkdir("/mnt/data/Documents", 0700);
    chown("/mnt/data/Documents", 4242, 4242);
    int docs = open("/mnt/data/Documents", O_RDONLY | O_DIRECTORY);
    uint32_t project = 0;
    check("a new subdirectory inherits project and flag", appd_get_project(docs, &project) == 1 && project == 4242, NULL);

    int err = 0;
    long long written = fill_as(4242, "/mnt/data/Documents/big", &err);
    char detail[96];
    snprintf(detail, sizeof detail, "(%lld bytes, %s)", written, strerrorname_np(err) ? strerrorname_np(err) : "no error");
    check("the app's writes stop at the limit with EDQUOT", err == EDQUOT && written > (3 << 20) && written <= (4 << 20), detail);
    uint64_t used = 0, limit = 0;
    check("usage read back", appd_get_project_usage(root, 4242, &used, &limit) == 0 && limit == (4 << 20) && used >= (3 << 20), NULL);
    // appd's own files (project 0) are not limited.
    written = fill_as(0, "/mnt/registry-like", &err);
    snprintf(detail, sizeof detail, "(%lld bytes, %s)", written, strerrorname_np(err) ? strerrorname_np(err) : "no error");
    check("project 0 writes on past it until the filesystem is full", err == ENOSPC && written > (20 << 20), detail);
    unlink("/mnt/registry-like");
    // Files of another project cannot be moved in (they would escape the charge).
    close(open("/mnt/outside", O_WRONLY | O_CREAT, 0600));
    check("rename into the project from project 0 is refused (EXDEV)",
        rename("/mnt/outside", "/mnt/data/Documents/outside") != 0 && errno == EXDEV, NULL);
    // What seccomp refuses the app (SandboxPolicy+Seccomp): without it the owner could clear
    // the inherit flag, and new files would be made in project 0.
    long flags = 0;
    ioctl(docs, FS_IOC_GETFLAGS, &flags);
    check("the directory carries FS_PROJINHERIT_FL", (flags & FS_PROJINHERIT_FL) != 0, NULL);
    check("limit 0 removes it", appd_set_project_limit(root, 4242, 0) == 0 && appd_get_project_usage(root, 4242, &used, &limit) == 0 && limit == 0, NULL);
    // What one install adds (DataQuota.swift: the state query, project id + inherit flag on
    // the container and its 6 standard directories, the limit), on fresh directories.
    double t2 = now_us();
    int rounds = 50, errors = 0;
    for (int i = 0; i < rounds; i++) {
        char dir[64];
        snprintf(dir, sizeof dir, "/mnt/c%d", i);
        mkdir(dir, 0700);
        int d = open(dir, O_RDONLY | O_DIRECTORY);
        errors += appd_project_quota_state(d) != 2;
        for (int k = 0; k < 7; k++) errors += appd_set_project(d, 5000 + i) != 0;
        errors += appd_set_project_limit(d, 5000 + i, 16 << 20) != 0;
        close(d);
    }
    snprintf(detail, sizeof detail, "(%.0f us per container, under qemu TCG)", (now_us() - t2) / rounds);
    check("quota setup of one install", errors == 0, detail);
    close(docs); close(data); close(root);
    umount("/mnt");
out:
    printf("quota-vm: done, %d failure(s)\n", failures);
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    return 0;
}
