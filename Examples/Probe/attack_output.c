// Attacks on appd through the app's own output (issue 13 §2): what an app can do to its
// stdout when it is a file the daemon reads, and what it gets now that it is a pipe. Each mode
// prints the probe's usual `NAME: allowed | refused ERRNO | value TEXT` lines (on stderr, so
// that they reach the log even when stdout is the thing attacked), then exits.
//
//   probe output-truncate         ftruncate(1, 1 TiB), then exit (a sparse log the daemon reads)
//   probe output-fallocate        fallocate 300 MB on stdout
//   probe output-append           clears O_APPEND on stdout, then writes over the start
//   probe output-longline MIB     MIB MiB without a newline, then "\nlongline end\n"
//   probe output-flood LINES      LINES numbered lines of 100 bytes as fast as it can
//   probe output-paced LINES MS   LINES numbered lines, one every MS milliseconds
//   probe output-burst LINES SEC  LINES numbered lines at once, SEC seconds of quiet, then
//                                 three `after burst N` lines
//   probe output-marked COUNT     COUNT times: `marked line N` on stdout, then the file
//                                 $HOME/marker-N (the test's sign that the line was written),
//                                 then 100 ms of quiet
//   probe output-flocked COUNT    flock(1, LOCK_EX), held to the end (the pipe the relay reads),
//                                 then what output-marked does, with `locked line N` lines
//   probe output-on-cue           waits (up to 60 s) for the file $HOME/cue, writes `last words`
//                                 on stdout, makes $HOME/said, then sleeps 60 s (to be suspended
//                                 with the line still in the pipe)
//   probe output-tiny COUNT US    COUNT 1-byte lines, each its own write, US microseconds
//                                 apart (the most time records per byte an app can cause)
//   probe output-forge-attach CODE  writes what an attached launch's frames look like
//                                 (docs/api.md: a forged exit with code 0, a forged instance,
//                                 an error, a chunked body's end, an oversized header), each
//                                 its own write, then exits with CODE
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void outcome(const char *name, long result) {
    if (result == -1) {
        const char *code = strerrorname_np(errno);
        fprintf(stderr, "%s: refused %s\n", name, code ? code : "EOTHER");
    } else {
        fprintf(stderr, "%s: allowed\n", name);
    }
}

static void stdout_kind(void) {
    struct stat st;
    if (fstat(1, &st) == 0) fprintf(stderr, "stdout-kind: value %s\n", S_ISFIFO(st.st_mode) ? "fifo" : S_ISREG(st.st_mode) ? "file" : "other");
}

static int write_all(const char *bytes, size_t length) {
    while (length > 0) {
        ssize_t n = write(1, bytes, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        bytes += n;
        length -= (size_t)n;
    }
    return 0;
}

/// A numbered line of exactly 100 bytes: `output line 00000042 ....\n`.
static void numbered(long i) {
    char line[101];
    int n = snprintf(line, sizeof line, "output line %08ld ", i);
    memset(line + n, '.', 99 - n);
    line[99] = '\n';
    write_all(line, 100);
}

static const char *home(void) {
    const char *path = getenv("HOME");
    return path ? path : "/tmp";
}

static void touch(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
}

/// COUNT times: `PREFIX line N` on stdout, then the file $HOME/marker-N, then 100 ms of quiet.
static void marked(const char *prefix, long count) {
    for (long i = 0; i < count; i++) {
        char line[64], marker[4096];
        int length = snprintf(line, sizeof line, "%s line %ld\n", prefix, i);
        write_all(line, (size_t)length);
        snprintf(marker, sizeof marker, "%s/marker-%ld", home(), i);
        touch(marker);
        struct timespec pause = {0, 100 * 1000000};
        nanosleep(&pause, NULL);
    }
}

int attack_output(int argc, char **argv) {
    const char *mode = argv[1];
    stdout_kind();
    if (!strcmp(mode, "output-truncate")) {
        outcome("ftruncate-stdout", ftruncate(1, 1LL << 40));
    } else if (!strcmp(mode, "output-fallocate")) {
        outcome("fallocate-stdout", fallocate(1, 0, 0, 300LL << 20));
    } else if (!strcmp(mode, "output-append")) {
        int flags = fcntl(1, F_GETFL);
        outcome("clear-append", flags < 0 ? -1 : fcntl(1, F_SETFL, flags & ~O_APPEND));
        outcome("pwrite-stdout", pwrite(1, "overwritten\n", 12, 0));
        printf("after append\n");
    } else if (!strcmp(mode, "output-longline") && argc > 2) {
        static char chunk[1 << 16];
        memset(chunk, 'x', sizeof chunk);
        long chunks = atol(argv[2]) * 16;
        for (long i = 0; i < chunks; i++) if (write_all(chunk, sizeof chunk) != 0) break;
        write_all("\nlongline end\n", 14);
    } else if (!strcmp(mode, "output-flood") && argc > 2) {
        for (long i = 0, n = atol(argv[2]); i < n; i++) numbered(i);
    } else if (!strcmp(mode, "output-burst") && argc > 3) {
        for (long i = 0, n = atol(argv[2]); i < n; i++) numbered(i);
        fprintf(stderr, "burst: value sent\n");
        sleep((unsigned)atoi(argv[3]));
        for (int i = 0; i < 3; i++) printf("after burst %d\n", i);
    } else if (!strcmp(mode, "output-paced") && argc > 3) {
        long ms = atol(argv[3]);
        struct timespec pause = {ms / 1000, (ms % 1000) * 1000000};
        for (long i = 0, n = atol(argv[2]); i < n; i++) {
            numbered(i);
            nanosleep(&pause, NULL);
        }
    } else if (!strcmp(mode, "output-marked") && argc > 2) {
        marked("marked", atol(argv[2]));
    } else if (!strcmp(mode, "output-flocked") && argc > 2) {
        outcome("flock-stdout", flock(1, LOCK_EX));
        marked("locked", atol(argv[2]));
    } else if (!strcmp(mode, "output-on-cue")) {
        char cue[4096], said[4096];
        snprintf(cue, sizeof cue, "%s/cue", home());
        snprintf(said, sizeof said, "%s/said", home());
        struct timespec tick = {0, 10 * 1000000};
        for (int i = 0; i < 6000 && access(cue, F_OK) != 0; i++) nanosleep(&tick, NULL);
        write_all("last words\n", 11);
        touch(said);
        sleep(60);
    } else if (!strcmp(mode, "output-tiny") && argc > 3) {
        long us = atol(argv[3]);
        struct timespec pause = {us / 1000000, (us % 1000000) * 1000};
        for (long i = 0, n = atol(argv[2]); i < n; i++) {
            write_all("x\n", 2);
            nanosleep(&pause, NULL);
        }
    } else if (!strcmp(mode, "output-forge-attach") && argc > 2) {
        static const char *payloads[][2] = {
            {"exit", "{\"id\":\"forged\",\"app\":\"com.example.forged\",\"state\":\"exited\",\"exit\":{\"reason\":\"exited\",\"code\":0}}"},
            {"instance", "{\"id\":\"forged\",\"app\":\"com.example.forged\",\"state\":\"active\"}"},
            {"error", "{\"error\":{\"code\":\"notFound\",\"message\":\"forged\"}}"},
        };
        for (size_t i = 0; i < sizeof payloads / sizeof payloads[0]; i++) {
            char frame[512];
            int n = snprintf(frame, sizeof frame, "\n%s %zu\n%s", payloads[i][0], strlen(payloads[i][1]), payloads[i][1]);
            write_all(frame, (size_t)n);
        }
        write_all("\r\n0\r\n\r\n", 7);
        write_all("output 99999999\n", 16);
        write_all("exit 3\n{}\n", 10);
        fflush(stdout);
        fprintf(stderr, "%s: value done\n", mode);
        return atoi(argv[2]);
    } else {
        fprintf(stderr, "probe: unknown mode %s\n", mode);
        return 2;
    }
    fflush(stdout);
    fprintf(stderr, "%s: value done\n", mode);
    return 0;
}
