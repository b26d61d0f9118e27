#ifndef APPD_CLINUX_AUDIT_H
#define APPD_CLINUX_AUDIT_H

#include <stdint.h>

// The audit netlink socket (NETLINK_AUDIT), through which the kernel reports Landlock and
// seccomp denials (docs/denials.md). Swift's Glibc module has neither linux/netlink.h nor
// linux/audit.h, and the request and reply are packed kernel structures: built here.

/// What AUDIT_GET says (struct audit_status, the fields the daemon uses).
typedef struct {
    uint32_t enabled;        // 0 off, 1 on, 2 locked
    uint32_t failure;        // 0 silent, 1 printk, 2 panic: what the kernel does when it loses a record
    uint32_t pid;            // the registered audit daemon (auditd), 0 if none
    uint32_t rate_limit;     // records per second, 0 = unlimited
    uint32_t backlog_limit;  // records queued at most before they are lost
    uint32_t lost;           // records lost since boot
    uint32_t backlog;        // records queued now
} appd_audit_status;

/// A socket bound to the read-only multicast group AUDIT_NLGRP_READLOG (needs CAP_AUDIT_READ):
/// a copy of every record, alongside auditd or journald, without taking their place.
/// Close-on-exec, blocking, with a receive timeout of `timeout_ms` (0: none). -1 with errno.
int appd_audit_open_readlog(int receive_buffer_bytes, int timeout_ms);

/// AUDIT_GET on a fresh unicast socket. 0, or -1 with errno (EPERM without CAP_AUDIT_CONTROL,
/// EPROTONOSUPPORT without CONFIG_AUDIT).
int appd_audit_get_status(appd_audit_status *status);

/// AUDIT_SET of `enabled` (needs CAP_AUDIT_CONTROL). 0, or -1 with errno (EPERM when locked).
int appd_audit_set_enabled(uint32_t enabled);

/// Receives one message: its type in `*type`, at most `capacity` bytes of its payload copied
/// to `buffer` (the rest is dropped). Returns the bytes copied, or -1 with errno (EAGAIN on
/// timeout, ENOBUFS when the socket's buffer overran and records were lost).
int appd_audit_receive(int fd, uint16_t *type, char *buffer, int capacity);

#endif
