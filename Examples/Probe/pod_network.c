#define _GNU_SOURCE
// Pod networking for appd-oci's engine checks (scripts/oci/app.sh, cri.py):
//   serve-any PORT        a pong server on every address (a pod's bridge, not only loopback)
//   fetch HOST PORT       connects, prints "fetch: LINE" (the server's first line) or the error
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int serve_any(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 64) != 0) {
        printf("serve-any: refused %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "unknown");
        return 1;
    }
    printf("serving-any %d\n", port);
    fflush(stdout);
    for (unsigned long served = 1;; served++) {
        int client = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (client < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        char line[64];
        int length = snprintf(line, sizeof line, "pong %lu\n", served);
        (void)!write(client, line, (size_t)length);
        close(client);
    }
}

static int fetch(const char *host, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd < 0 || inet_pton(AF_INET, host, &addr.sin_addr) != 1 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        printf("fetch: refused %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "unknown");
        return 1;
    }
    char line[64] = {0};
    ssize_t count = read(fd, line, sizeof line - 1);
    if (count <= 0) {
        printf("fetch: empty\n");
        return 1;
    }
    line[strcspn(line, "\n")] = 0;
    printf("fetch: %s\n", line);
    return 0;
}

/// -1 when `argv[1]` is none of these modes, else the exit code.
int pod_network(int argc, char **argv) {
    if (!strcmp(argv[1], "serve-any") && argc > 2) return serve_any(atoi(argv[2]));
    if (!strcmp(argv[1], "fetch") && argc > 3) return fetch(argv[2], atoi(argv[3]));
    return -1;
}
