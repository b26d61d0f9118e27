// /init of a throwaway VM that runs one command on a stock Debian kernel, with this host's
// root filesystem (shared read-only over virtio-9p, tag "hostroot") as its root and fresh
// tmpfs on /tmp, /var/tmp and /run: tests that need kernel features this machine's kernel
// lacks (project quotas) run there against the binaries built here (scripts/vm-run).
// It loads the modules named in /modules/order (in that order), mounts, chroots, runs
// `/bin/sh -c "$(cat /vmcmd)"`, prints its exit status as `vm-run: exit N`, powers off.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char *slurp(const char *path) {
    static char buffer[65536];
    int fd = open(path, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buffer, sizeof buffer - 1);
    buffer[n > 0 ? n : 0] = 0;
    if (fd >= 0) close(fd);
    return buffer;
}

static void must(int ok, const char *what) {
    if (!ok) printf("vm-run: %s: %s\n", what, strerror(errno));
}

int main(void) {
    mkdir("/proc", 0755);
    mount("proc", "/proc", "proc", 0, NULL);
    mkdir("/dev", 0755);
    mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
    char order[4096];
    strncpy(order, slurp("/modules/order"), sizeof order - 1);
    order[sizeof order - 1] = 0;
    for (char *name = strtok(order, "\n"); name; name = strtok(NULL, "\n")) {
        char path[256];
        snprintf(path, sizeof path, "/modules/%s.ko", name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST))
            printf("vm-run: module %s: %s\n", name, strerror(errno));
        if (fd >= 0) close(fd);
    }
    char command[65536];
    strncpy(command, slurp("/vmcmd"), sizeof command - 1);
    command[sizeof command - 1] = 0;
    mkdir("/newroot", 0755);
    must(mount("hostroot", "/newroot", "9p", MS_RDONLY,
        "trans=virtio,version=9p2000.L,msize=524288,cache=loose") == 0, "mount hostroot");
    // The repository (/vmrepo: its path) stays visible where it is, also when it lies under one
    // of the tmpfs mounts below (a clone in /tmp or /var/tmp): bound aside first, moved back.
    char repo[4096] = "", kept[4200] = "";
    strncpy(repo, slurp("/vmrepo"), sizeof repo - 1);
    if (repo[0] == '/') {
        snprintf(kept, sizeof kept, "/newroot%s", repo);
        mkdir("/keep", 0755);
        must(mount(kept, "/keep", NULL, MS_BIND | MS_REC, NULL) == 0, "bind the repository aside");
    }
    const char *tmpfs[] = {"/newroot/tmp", "/newroot/var/tmp", "/newroot/run"};
    for (int i = 0; i < 3; i++) must(mount("tmpfs", tmpfs[i], "tmpfs", 0, "mode=1777") == 0, tmpfs[i]);
    if (repo[0] == '/') {
        for (char *p = kept + strlen("/newroot") + 1; *p; p++) {
            if (*p != '/') continue;
            *p = 0;
            mkdir(kept, 0755);
            *p = '/';
        }
        mkdir(kept, 0755);
        must(mount("/keep", kept, NULL, MS_MOVE, NULL) == 0, "put the repository back");
    }
    must(mount("proc", "/newroot/proc", "proc", 0, NULL) == 0, "proc");
    must(mount("sysfs", "/newroot/sys", "sysfs", 0, NULL) == 0, "sysfs");
    must(mount("cgroup2", "/newroot/sys/fs/cgroup", "cgroup2", 0, NULL) == 0, "cgroup2");
    must(mount("/dev", "/newroot/dev", NULL, MS_BIND | MS_REC, NULL) == 0, "dev");
    mkdir("/dev/pts", 0755);
    mount("devpts", "/newroot/dev/pts", "devpts", 0, NULL);
    mkdir("/dev/shm", 01777);
    mount("tmpfs", "/newroot/dev/shm", "tmpfs", 0, "mode=1777");
    // As systemd leaves it on a host: the controllers appd's cgroups use.
    int control = open("/newroot/sys/fs/cgroup/cgroup.subtree_control", O_WRONLY);
    if (control >= 0) {
        write(control, "+memory +pids +cpu", 18);
        close(control);
    }
    // Foundation wakes its run loop through a UDP pair on 127.0.0.1: lo must be up.
    int sock = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq lo;
    memset(&lo, 0, sizeof lo);
    strcpy(lo.ifr_name, "lo");
    lo.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
    must(sock >= 0 && ioctl(sock, SIOCSIFFLAGS, &lo) == 0, "lo up");
    if (sock >= 0) close(sock);
    must(chroot("/newroot") == 0 && chdir("/") == 0, "chroot");
    pid_t child = fork();
    if (child == 0) {
        setenv("PATH", "/opt/swift/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
        setenv("HOME", "/root", 1);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    // PID 1 reaps every orphan until the command itself ends.
    for (;;) {
        pid_t pid = wait(&status);
        if (pid == child || (pid < 0 && errno == ECHILD)) break;
    }
    printf("vm-run: exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    return 0;
}
