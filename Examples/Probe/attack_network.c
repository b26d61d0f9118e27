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
//   probe loopback PORT              the host's loopback (issue 24 §3): TCP connects to PORT on
//                                    127.0.0.1 (loopback-tcp4), 127.0.0.2 (loopback-alias),
//                                    0.0.0.0 (loopback-any), ::ffff:127.0.0.1 (loopback-mapped),
//                                    a UDP sendto 127.0.0.1:PORT (loopback-udp); then its own
//                                    sockets there: a UDP pair connected both ways, as
//                                    Foundation's CFSocket makes (own-udp-pair), and a connect to
//                                    a listener of its own (own-tcp)
//   probe serve PORT SECONDS         listens on 127.0.0.1:PORT (port 0: any), prints the port
//                                    (serve-port), sleeps SECONDS
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

static int tcp_connect(int family, const char *address, int port) {
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_storage storage;
    memset(&storage, 0, sizeof storage);
    socklen_t length;
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&storage;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        inet_pton(AF_INET, address, &in->sin_addr);
        length = sizeof *in;
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&storage;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        inet_pton(AF_INET6, address, &in6->sin6_addr);
        length = sizeof *in6;
    }
    int result = connect(fd, (struct sockaddr *)&storage, length);
    int saved = errno;
    close(fd);
    errno = saved;
    return result;
}

/// A socket of `type` bound to 127.0.0.1 on a port the kernel picks; its address in `address`.
static int bound_loopback(int type, struct sockaddr_in *address) {
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    socklen_t length = sizeof *address;
    *address = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)address, sizeof *address) != 0
        || getsockname(fd, (struct sockaddr *)address, &length) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static void loopback(int port) {
    net_report("loopback-tcp4", tcp_connect(AF_INET, "127.0.0.1", port));
    net_report("loopback-alias", tcp_connect(AF_INET, "127.0.0.2", port));
    net_report("loopback-any", tcp_connect(AF_INET, "0.0.0.0", port));
    net_report("loopback-mapped", tcp_connect(AF_INET6, "::ffff:127.0.0.1", port));
    int udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in target = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    net_report("loopback-udp", udp < 0 ? -1 : sendto(udp, "x", 1, 0, (struct sockaddr *)&target, sizeof target));
    if (udp >= 0) close(udp);

    struct sockaddr_in a_address, b_address;
    int a = bound_loopback(SOCK_DGRAM, &a_address);
    int b = bound_loopback(SOCK_DGRAM, &b_address);
    long pair = a < 0 || b < 0 ? -1
        : connect(a, (struct sockaddr *)&b_address, sizeof b_address) != 0 ? -1
        : connect(b, (struct sockaddr *)&a_address, sizeof a_address) != 0 ? -1
        : send(a, "x", 1, 0) != 1 ? -1 : 0;
    net_report("own-udp-pair", pair);
    if (a >= 0) close(a);
    if (b >= 0) close(b);
    struct sockaddr_in listener_address;
    int listener = bound_loopback(SOCK_STREAM, &listener_address);
    if (listener < 0 || listen(listener, 1) != 0) net_report("own-tcp", -1);
    else net_report("own-tcp", tcp_connect(AF_INET, "127.0.0.1", ntohs(listener_address.sin_port)));
    if (listener >= 0) close(listener);
}

static void serve(int port, int seconds) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof address) != 0 || listen(fd, 16) != 0
        || getsockname(fd, (struct sockaddr *)&address, &length) != 0) {
        net_report("serve", -1);
        return;
    }
    printf("serve-port: value %d\n", ntohs(address.sin_port));
    fflush(stdout);
    sleep((unsigned)seconds);
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
    else if (!strcmp(mode, "loopback") && argc > 2) loopback(atoi(argv[2]));
    else if (!strcmp(mode, "serve") && argc > 3) serve(atoi(argv[2]), atoi(argv[3]));
    else return -1;
    return 0;
}
