// Attacks on the lifecycle channel (issue 13 §1), from inside the sandbox, through fd 3:
//
//   probe attack-channel send MESSAGE...   each MESSAGE as one datagram, in order; a MESSAGE
//                                          starting with '@' is a built-in one (below)
//   probe attack-channel flood SECONDS [PER_SECOND [MESSAGE]]
//                                          hello, ready, then unknown messages (or MESSAGE) as
//                                          fast as the socket takes them (or PER_SECOND a second,
//                                          0 for as fast) for SECONDS
//
// Then it reports how the channel ended and stays alive (so the test sees the app survive its
// closed channel): `attack-channel: value sent N`, `attack-channel: value closed after N`
// or `attack-channel: value open after N`.
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/// A built-in message: what a command line cannot carry (bytes that are not UTF-8) or would
/// make too long to read.
static char *builtin(const char *name, size_t *length) {
    char *out = NULL;
    if (!strcmp(name, "@huge")) {
        // One byte over the 64 KiB limit.
        size_t n = 65 * 1024 + 1;
        out = malloc(n);
        memset(out, ' ', n);
        memcpy(out, "{\"type\":\"ready\"", 15);
        out[n - 1] = '}';
        *length = n;
    } else if (!strcmp(name, "@nonutf8")) {
        out = strdup("{\"type\":\"beginBackgroundTask\",\"name\":\"\xff\xfe\xc0\xaf\"}");
        *length = strlen(out);
    } else if (!strcmp(name, "@deep")) {
        // 30,000 levels of arrays in an unknown field: a recursive reader runs out of stack.
        size_t levels = 30000, n = 0;
        out = malloc(levels * 2 + 64);
        n += sprintf(out, "{\"type\":\"ready\",\"x\":");
        for (size_t i = 0; i < levels; i++) out[n++] = '[';
        for (size_t i = 0; i < levels; i++) out[n++] = ']';
        out[n++] = '}';
        *length = n;
    } else if (!strcmp(name, "@longnumber")) {
        // A 5,000-digit integer: no Double, no Int holds it.
        size_t digits = 5000, n = 0;
        out = malloc(digits + 64);
        n += sprintf(out, "{\"type\":\"endBackgroundTask\",\"task\":");
        for (size_t i = 0; i < digits; i++) out[n++] = '9';
        out[n++] = '}';
        *length = n;
    } else if (!strcmp(name, "@nul")) {
        static const char text[] = "{\"type\":\"ready\"}\0{\"type\":\"ready\"}";
        out = malloc(sizeof text - 1);
        memcpy(out, text, sizeof text - 1);
        *length = sizeof text - 1;
    }
    return out;
}

static int channel_fd(void) {
    const char *named = getenv("APPD_LIFECYCLE_FD");
    if (!named) {
        printf("attack-channel: value no APPD_LIFECYCLE_FD\n");
        return -1;
    }
    return atoi(named);
}

/// Waits (up to `seconds`) for the daemon to close its end; true if it did.
static int closed_within(int fd, int seconds) {
    char buffer[65536];
    for (int waited = 0; waited < seconds * 10; waited++) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0) continue;
        ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return 1;
    }
    return 0;
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int attack_channel(int argc, char **argv) {
    int fd = channel_fd();
    if (fd < 0) return 1;
    long sent = 0;
    int closed = 0;
    if (argc > 3 && !strcmp(argv[2], "send")) {
        for (int i = 3; i < argc && !closed; i++) {
            size_t length = strlen(argv[i]);
            char *message = argv[i][0] == '@' ? builtin(argv[i], &length) : argv[i];
            if (!message) { fprintf(stderr, "probe: unknown built-in message %s\n", argv[i]); return 2; }
            if (send(fd, message, length, MSG_NOSIGNAL) >= 0) sent++;
            else if (errno == EPIPE || errno == ECONNRESET) closed = 1;
            if (message != argv[i]) free(message);
            // Each message its own moment, so the daemon reads them in order as a real app's.
            usleep(20000);
        }
        printf("attack-channel: value sent %ld\n", sent);
        fflush(stdout);
        closed = closed || closed_within(fd, 5);
    } else if (argc > 3 && !strcmp(argv[2], "flood")) {
        double seconds = atof(argv[3]);
        double rate = argc > 4 ? atof(argv[4]) : 0;
        const char *fixed = argc > 5 ? argv[5] : NULL;
        const char *hello = "{\"type\":\"hello\",\"version\":1}", *ready = "{\"type\":\"ready\"}";
        send(fd, hello, strlen(hello), MSG_NOSIGNAL);
        send(fd, ready, strlen(ready), MSG_NOSIGNAL);
        char message[128];
        double start = now_seconds();
        while (now_seconds() - start < seconds) {
            if (rate > 0) {
                double due = start + (double)sent / rate;
                double wait = due - now_seconds();
                if (wait > 0) usleep((useconds_t)(wait * 1e6));
            }
            int n = fixed ? snprintf(message, sizeof message, "%s", fixed)
                          : snprintf(message, sizeof message, "{\"type\":\"flood-%ld\",\"n\":%ld}", sent % 1000, sent);
            if (n >= (int)sizeof message) n = (int)sizeof message - 1;
            if (send(fd, message, (size_t)n, MSG_NOSIGNAL) >= 0) {
                sent++;
            } else if (errno == EPIPE || errno == ECONNRESET) {
                closed = 1;
                break;
            }
        }
        printf("attack-channel: value sent %ld in %.1f s\n", sent, now_seconds() - start);
        fflush(stdout);
        // A daemon that closed the channel while we slept leaves a readable EOF.
        closed = closed || closed_within(fd, 1);
    } else {
        fprintf(stderr, "probe: attack-channel send MESSAGE... | flood SECONDS [PER_SECOND [MESSAGE]]\n");
        return 2;
    }
    printf("attack-channel: value %s after %ld\n", closed ? "closed" : "open", sent);
    fflush(stdout);
    for (;;) pause();
}
