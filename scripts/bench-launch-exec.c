// Used by scripts/bench-launch: hyperfine -N runs commands without a shell, so it cannot open
// the profile and the seccomp filter on fds 3 and 4 the way appd does. This does, then execs
// the command. Every measured command (the /bin/true floor, appd-exec, bwrap) goes through it,
// so they all pay the same extra exec.
//
//   gcc -O2 -static -o bench-launch-exec scripts/bench-launch-exec.c
//   bench-launch-exec PROFILE BPF COMMAND [ARG...]
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void open_at(const char *path, int target) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "bench-launch-exec: %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    if (fd != target) {
        if (dup2(fd, target) < 0) {
            fprintf(stderr, "bench-launch-exec: dup2 %d: %s\n", target, strerror(errno));
            _exit(127);
        }
        close(fd);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench-launch-exec PROFILE BPF COMMAND [ARG...]\n");
        return 2;
    }
    // Whatever fds 3 and 4 were (hyperfine leaves them closed), they end up as these two files.
    open_at(argv[1], 3);
    open_at(argv[2], 4);
    execv(argv[3], argv + 3);
    fprintf(stderr, "bench-launch-exec: %s: %s\n", argv[3], strerror(errno));
    return 127;
}
