// Files an app makes in its own home, for the tests of what appd does with the data container
// (tmp emptied after the last exit, the sizes `appd info` shows): each step is done in order,
// relative to $HOME, and printed as `home: STEP allowed|refused ERRNO`.
//
//   probe home STEP...
//       file REL BYTES          writes BYTES bytes (not sparse) to $HOME/REL
//       link TARGET REL         a symlink $HOME/REL -> TARGET (TARGET as given: it may name a
//                               path of the host that the app cannot see)
//       mkdir REL               a directory $HOME/REL
//       sleep SECONDS           waits (so that the instance is still running)
//       swap REL TARGET ROUNDS  REL (a directory) and a symlink REL.swap -> TARGET trade places
//                               ROUNDS times in a tight loop (renameat2 RENAME_EXCHANGE): what
//                               the daemon finds at REL flips between a folder and a link
//       fifo REL                a FIFO $HOME/REL
//       sparse REL BYTES        a sparse file of BYTES: 4 KiB of 's' at 1 MiB and 4 KiB of 'e'
//                               at its end, holes elsewhere
//       hardlink TARGET REL     a hard link $HOME/REL to $HOME/TARGET
//       grow REL SECONDS        appends 64 KiB blocks to $HOME/REL for SECONDS, cutting it back
//                               to nothing each time it passes 16 MiB (a file that grows and
//                               shrinks while a backup reads it); `allowed` after the first
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void result(const char *step, const char *rel, int ok) {
    const char *code = strerrorname_np(errno);
    if (ok) printf("home: %s %s allowed\n", step, rel);
    else printf("home: %s %s refused %s\n", step, rel, code ? code : "EOTHER");
    fflush(stdout);
}

static int write_bytes(const char *path, long bytes) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    static char block[65536];
    memset(block, 'x', sizeof block);
    while (bytes > 0) {
        size_t chunk = bytes < (long)sizeof block ? (size_t)bytes : sizeof block;
        ssize_t n = write(fd, block, chunk);
        if (n <= 0) {
            close(fd);
            return 0;
        }
        bytes -= n;
    }
    int ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

int home_files(int argc, char **argv) {
    const char *home = getenv("HOME");
    if (!home || chdir(home) != 0) {
        printf("home: chdir refused\n");
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        const char *step = argv[i];
        if (!strcmp(step, "file") && i + 2 < argc) {
            result(step, argv[i + 1], write_bytes(argv[i + 1], atol(argv[i + 2])));
            i += 2;
        } else if (!strcmp(step, "link") && i + 2 < argc) {
            result(step, argv[i + 2], symlink(argv[i + 1], argv[i + 2]) == 0);
            i += 2;
        } else if (!strcmp(step, "mkdir") && i + 1 < argc) {
            result(step, argv[i + 1], mkdir(argv[i + 1], 0700) == 0);
            i += 1;
        } else if (!strcmp(step, "swap") && i + 3 < argc) {
            char link[4096];
            snprintf(link, sizeof link, "%s.swap", argv[i + 1]);
            int ok = symlink(argv[i + 2], link) == 0;
            long rounds = atol(argv[i + 3]), done = 0;
            for (; ok && done < rounds; done++)
                ok = renameat2(AT_FDCWD, argv[i + 1], AT_FDCWD, link, RENAME_EXCHANGE) == 0;
            result(step, argv[i + 1], ok);
            printf("home: swap rounds %ld\n", done);
            fflush(stdout);
            i += 3;
        } else if (!strcmp(step, "sparse") && i + 2 < argc) {
            long long size = atoll(argv[i + 2]);
            int fd = open(argv[i + 1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            static char part[4096];
            int ok = fd >= 0 && size >= (2 << 20) && ftruncate(fd, size) == 0;
            memset(part, 's', sizeof part);
            ok = ok && pwrite(fd, part, sizeof part, 1 << 20) == (ssize_t)sizeof part;
            memset(part, 'e', sizeof part);
            ok = ok && pwrite(fd, part, sizeof part, size - (long long)sizeof part)
                == (ssize_t)sizeof part;
            ok = ok && fsync(fd) == 0;
            result(step, argv[i + 1], ok);
            if (fd >= 0) close(fd);
            i += 2;
        } else if (!strcmp(step, "hardlink") && i + 2 < argc) {
            result(step, argv[i + 2], link(argv[i + 1], argv[i + 2]) == 0);
            i += 2;
        } else if (!strcmp(step, "fifo") && i + 1 < argc) {
            result(step, argv[i + 1], mkfifo(argv[i + 1], 0600) == 0);
            i += 1;
        } else if (!strcmp(step, "grow") && i + 2 < argc) {
            int fd = open(argv[i + 1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            static char block[65536];
            memset(block, 'g', sizeof block);
            int ok = fd >= 0 && write(fd, block, sizeof block) == (ssize_t)sizeof block;
            result(step, argv[i + 1], ok);
            struct timespec start, now;
            clock_gettime(CLOCK_MONOTONIC, &start);
            long written = sizeof block;
            while (ok) {
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec - start.tv_sec >= atol(argv[i + 2])) break;
                if (written >= 16L << 20) {
                    ftruncate(fd, 0);
                    lseek(fd, 0, SEEK_SET);
                    written = 0;
                }
                if (write(fd, block, sizeof block) > 0) written += sizeof block;
            }
            if (fd >= 0) close(fd);
            i += 2;
        } else if (!strcmp(step, "sleep") && i + 1 < argc) {
            sleep((unsigned)atoi(argv[i + 1]));
            i += 1;
        } else {
            printf("home: unknown step %s\n", step);
            return 2;
        }
    }
    return 0;
}
