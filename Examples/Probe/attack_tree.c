// Attacks on appd through the files of the app's data container (issue 13 §3): trees that a
// recursive walk, or one that keeps a descriptor per level, cannot remove.
//
//   probe deep-tree LEVELS [FOLDER]
//                            under $HOME/FOLDER/deep (Documents unless named): LEVELS nested
//                            directories; every
//                            1,000 levels a FIFO, a unix socket, symlinks to / and to ..,
//                            a file and a directory (with a file in it) made mode 000; at
//                            the bottom 2,000 files in one directory and a mode-000 directory
//                            chain. Prints `deep-tree: value LEVELS` when done.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(const char *what) {
    const char *code = strerrorname_np(errno);
    printf("deep-tree: refused %s (%s)\n", code ? code : "EOTHER", what);
    return 1;
}

static void oddities(int dir) {
    mkfifoat(dir, "fifo", 0600);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s >= 0) {
        struct sockaddr_un address = {.sun_family = AF_UNIX};
        snprintf(address.sun_path, sizeof address.sun_path, "/proc/self/fd/%d/sock", dir);
        bind(s, (struct sockaddr *)&address, sizeof address);
        close(s);
    }
    symlinkat("/", dir, "to-root");
    symlinkat("..", dir, "to-parent");
    int f = openat(dir, "locked-file", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (f >= 0) {
        write(f, "x", 1);
        fchmod(f, 0);
        close(f);
    }
    if (mkdirat(dir, "locked-dir", 0700) == 0) {
        int inner = openat(dir, "locked-dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (inner >= 0) {
            int g = openat(inner, "inside", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
            if (g >= 0) close(g);
            fchmod(inner, 0);
            close(inner);
        }
    }
}

int attack_tree(int argc, char **argv) {
    if (argc < 3) return 2;
    long levels = atol(argv[2]);
    const char *home = getenv("HOME");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", home ? home : "", argc > 3 ? argv[3] : "Documents");
    int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return fail("open Documents");
    const char *name = "deep";
    for (long level = 0; level < levels; level++) {
        if (mkdirat(dir, name, 0700) != 0 && errno != EEXIST) return fail("mkdir");
        int next = openat(dir, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (next < 0) return fail("open");
        close(dir);
        dir = next;
        name = "d";
        if (level % 1000 == 999) oddities(dir);
    }
    char file[32];
    for (int i = 0; i < 2000; i++) {
        snprintf(file, sizeof file, "f%04d", i);
        int f = openat(dir, file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (f < 0) return fail("create");
        close(f);
    }
    oddities(dir);
    // A chain of directories each mode 000 (the innermost first, so the chain can be built).
    if (mkdirat(dir, "z1", 0700) == 0) {
        int z1 = openat(dir, "z1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (z1 >= 0) {
            mkdirat(z1, "z2", 0);
            fchmod(z1, 0);
            close(z1);
        }
    }
    close(dir);
    printf("deep-tree: value %ld\n", levels);
    return 0;
}
