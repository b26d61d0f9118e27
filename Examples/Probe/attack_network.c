// The network attacks of issue 13 §7 and issue 14 §4, as a separate file so that main.c only
// dispatches (one line). Same output format as main.c: `NAME: allowed|refused ERRNO|value TEXT`.
//
//   probe bind-udp PORT              a UDP socket bound to 127.0.0.1:PORT (no listen() needed to
//                                    receive); then waits up to 5 s for one datagram
//   probe unix-socket                socket(AF_UNIX, SOCK_STREAM)
//   probe socketpair-stream          socketpair(AF_UNIX, SOCK_STREAM)
//   probe socketpair-dgram NAME      socketpair(AF_UNIX, SOCK_DGRAM), then sendto() the host's
//                                    abstract socket @NAME with it (a datagram pair can name any
//                                    address)
//   probe proc-net FILE NEEDLE       reads /proc/net/FILE: its line count and whether NEEDLE is
//                                    in it
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void net_report(const char *name, long result) {
    if (result == -1) printf("%s: refused %s\n", name, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
    else printf("%s: allowed\n", name);
    fflush(stdout);
}

static void bind_udp(int port) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) { net_report("bind-udp", -1); return; }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    long r = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    net_report("bind-udp", r);
    if (r != 0) return;
    struct pollfd poller = {.fd = fd, .events = POLLIN};
    char buffer[256];
    if (poll(&poller, 1, 5000) == 1) {
        ssize_t n = recv(fd, buffer, sizeof buffer - 1, 0);
        buffer[n > 0 ? n : 0] = 0;
        printf("udp-received: value %s\n", buffer);
    } else {
        printf("udp-received: value nothing\n");
    }
    fflush(stdout);
}

static void socketpair_dgram(const char *name) {
    int pair[2];
    long r = socketpair(AF_UNIX, SOCK_DGRAM, 0, pair);
    net_report("socketpair-dgram", r);
    if (r != 0) return;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path + 1, name, sizeof addr.sun_path - 2);
    socklen_t length = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
    net_report("sendto-abstract", sendto(pair[0], "hello from the app", 18, 0, (struct sockaddr *)&addr, length));
}

static void proc_net(const char *file, const char *needle) {
    char path[256];
    snprintf(path, sizeof path, "/proc/net/%s", file);
    FILE *stream = fopen(path, "r");
    if (!stream) { net_report("proc-net", -1); return; }
    char line[4096];
    long lines = 0;
    int found = 0;
    while (fgets(line, sizeof line, stream)) {
        lines++;
        if (strstr(line, needle)) found = 1;
    }
    fclose(stream);
    printf("proc-net: allowed\nproc-net-lines: value %ld\nproc-net-found: value %s\n", lines, found ? "yes" : "no");
    fflush(stdout);
}

/// 0 when `argv[1]` was one of these modes, -1 when it is not.
int attack_network(int argc, char **argv) {
    const char *mode = argv[1];
    if (!strcmp(mode, "bind-udp") && argc > 2) bind_udp(atoi(argv[2]));
    else if (!strcmp(mode, "unix-socket")) net_report("unix-socket", socket(AF_UNIX, SOCK_STREAM, 0));
    else if (!strcmp(mode, "socketpair-stream")) {
        int pair[2];
        net_report("socketpair-stream", socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
    } else if (!strcmp(mode, "socketpair-dgram") && argc > 2) socketpair_dgram(argv[2]);
    else if (!strcmp(mode, "proc-net") && argc > 3) proc_net(argv[2], argv[3]);
    else return -1;
    return 0;
}
