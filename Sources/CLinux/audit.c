#define _GNU_SOURCE
#include "clinux_audit.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static void set_timeout(int fd, int timeout_ms) {
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

int appd_audit_open_readlog(int receive_buffer_bytes, int timeout_ms) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
    if (fd < 0) return -1;
    struct sockaddr_nl address = {.nl_family = AF_NETLINK, .nl_groups = 1U << (AUDIT_NLGRP_READLOG - 1)};
    if (bind(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    if (receive_buffer_bytes > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof receive_buffer_bytes);
    if (timeout_ms > 0) set_timeout(fd, timeout_ms);
    return fd;
}

/// Sends one request and reads until its reply (or error) arrives; `reply` gets the payload
/// of a message of type `want`. Returns 0 or -1 with errno.
static int request(uint16_t type, const void *payload, size_t size, uint16_t want, void *reply, size_t reply_size) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
    if (fd < 0) return -1;
    set_timeout(fd, 1000);
    struct {
        struct nlmsghdr header;
        char payload[sizeof(struct audit_status)];
    } message;
    memset(&message, 0, sizeof message);
    if (size > sizeof message.payload) { close(fd); errno = EINVAL; return -1; }
    message.header.nlmsg_len = NLMSG_LENGTH(size);
    message.header.nlmsg_type = type;
    message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    message.header.nlmsg_seq = 1;
    if (size) memcpy(message.payload, payload, size);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, &message, message.header.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    int result = -1, got_reply = want == 0, got_ack = 0;
    char buffer[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
    for (int round = 0; round < 8 && !(got_reply && got_ack); round++) {
        ssize_t n = recv(fd, buffer, sizeof buffer, 0);
        if (n < 0) break;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buffer; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr *error = NLMSG_DATA(h);
                if (error->error != 0) {
                    close(fd);
                    errno = -error->error;
                    return -1;
                }
                got_ack = 1;
            } else if (want && h->nlmsg_type == want) {
                size_t have = h->nlmsg_len - NLMSG_HDRLEN;
                memset(reply, 0, reply_size);
                memcpy(reply, NLMSG_DATA(h), have < reply_size ? have : reply_size);
                got_reply = 1;
            }
        }
    }
    if (got_reply) result = 0;
    else if (errno == 0) errno = EIO;
    close(fd);
    return result;
}

int appd_audit_get_status(appd_audit_status *status) {
    struct audit_status s;
    if (request(AUDIT_GET, NULL, 0, AUDIT_GET, &s, sizeof s) != 0) return -1;
    status->enabled = s.enabled;
    status->failure = s.failure;
    status->pid = s.pid;
    status->rate_limit = s.rate_limit;
    status->backlog_limit = s.backlog_limit;
    status->lost = s.lost;
    status->backlog = s.backlog;
    return 0;
}

int appd_audit_set_enabled(uint32_t enabled) {
    struct audit_status s;
    memset(&s, 0, sizeof s);
    s.mask = AUDIT_STATUS_ENABLED;
    s.enabled = enabled;
    return request(AUDIT_SET, &s, sizeof s, 0, NULL, 0);
}

int appd_audit_receive(int fd, uint16_t *type, char *buffer, int capacity) {
    // MAX_AUDIT_MESSAGE_LENGTH is 8970; a record never spans messages.
    char message[9216] __attribute__((aligned(NLMSG_ALIGNTO)));
    ssize_t n = recv(fd, message, sizeof message, 0);
    if (n < 0) return -1;
    struct nlmsghdr *h = (struct nlmsghdr *)message;
    if ((size_t)n < NLMSG_HDRLEN || h->nlmsg_len < NLMSG_HDRLEN) { errno = EBADMSG; return -1; }
    size_t length = (size_t)h->nlmsg_len > (size_t)n ? (size_t)n : h->nlmsg_len;
    length -= NLMSG_HDRLEN;
    if (capacity < 0) capacity = 0;
    if (length > (size_t)capacity) length = (size_t)capacity;
    *type = h->nlmsg_type;
    memcpy(buffer, NLMSG_DATA(h), length);
    return (int)length;
}
