// Disk attacks (issue 13 §6): fill the data container, and try to move files out of its
// project quota. Output in probe's format (main.c): `NAME: value X`, `NAME: refused ERRNO`.
//
//   probe disk-fill PATH       writes PATH in 64 KiB chunks until a write fails; prints the
//                              bytes written and the errno (EDQUOT at the quota, ENOSPC when
//                              the filesystem is full), then fsyncs (delayed allocation may
//                              report the quota only then) and says whether that failed
//   probe disk-escape DIR      tries to clear the project-inherit flag of DIR (FS_IOC_SETFLAGS)
//                              and to put DIR in project 0 (FS_IOC_FSSETXATTR)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void outcome(const char *name, int failed) {
    if (failed) printf("%s: refused %s\n", name, strerrorname_np(errno) ? strerrorname_np(errno) : "unknown");
    else printf("%s: allowed\n", name);
    fflush(stdout);
}

static int fill(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        outcome("disk-fill-open", 1);
        return 1;
    }
    static char chunk[64 << 10];
    memset(chunk, 'x', sizeof chunk);
    long long total = 0;
    int failed = 0;
    for (;;) {
        ssize_t n = write(fd, chunk, sizeof chunk);
        if (n <= 0) {
            failed = 1;
            break;
        }
        total += n;
        if (total >= (1LL << 40)) break;
    }
    int saved = errno;
    printf("disk-fill: value %lld\n", total);
    errno = saved;
    outcome("disk-fill", failed);
    outcome("disk-fill-fsync", fsync(fd) != 0);
    close(fd);
    return 0;
}

static int escape(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        outcome("disk-escape-open", 1);
        return 1;
    }
    long flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) flags = 0;
    flags &= ~(long)FS_PROJINHERIT_FL;
    outcome("disk-escape-setflags", ioctl(fd, FS_IOC_SETFLAGS, &flags) != 0);
    struct fsxattr attr;
    memset(&attr, 0, sizeof attr);
    if (ioctl(fd, FS_IOC_FSGETXATTR, &attr) != 0) memset(&attr, 0, sizeof attr);
    attr.fsx_projid = 0;
    attr.fsx_xflags &= ~FS_XFLAG_PROJINHERIT;
    outcome("disk-escape-fssetxattr", ioctl(fd, FS_IOC_FSSETXATTR, &attr) != 0);
    close(fd);
    return 0;
}

int attack_disk(int argc, char **argv) {
    if (!strcmp(argv[1], "disk-fill") && argc > 2) return fill(argv[2]);
    if (!strcmp(argv[1], "disk-escape") && argc > 2) return escape(argv[2]);
    fprintf(stderr, "probe: disk-fill PATH | disk-escape DIR\n");
    return 2;
}
