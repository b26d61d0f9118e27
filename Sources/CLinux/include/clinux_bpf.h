#ifndef APPD_CLINUX_BPF_H
#define APPD_CLINUX_BPF_H

#include <stdint.h>

/// Attaches to the cgroup v2 directory `cgroup_fd` two cgroup/sock_addr programs
/// (BPF_CGROUP_INET4_BIND, BPF_CGROUP_INET6_BIND) that refuse, with EPERM, every bind(2) of a
/// TCP or UDP socket that names a port; binding port 0 (the kernel picks one, as connect does)
/// stays allowed. Every process in the cgroup and below is bound by it, and the sandboxed app
/// cannot detach it (seccomp refuses bpf). Swift cannot call the bpf(2) syscall (variadic
/// syscall()), nor build union bpf_attr conveniently. Each refusal is counted in a BPF array
/// map (with the last port and socket type) shared by both programs: returns its fd
/// (close-on-exec; the programs hold the map too), or -1 with errno set.
int appd_cgroup_deny_port_binds(int cgroup_fd);

/// Reads the counter of appd_cgroup_deny_port_binds: binds refused so far, and the port (host
/// order) and socket type of the last one. 0, or -1 with errno set.
int appd_bind_counter_read(int counter, uint64_t *refused, uint32_t *port, uint32_t *type);

/// The most ports appd_cgroup_guard_loopback takes (each is one instruction of the program).
#define APPD_LOOPBACK_PORTS_MAX 64

/// Attaches to the cgroup v2 directory `cgroup_fd` the loopback guard (bpf_loopback.c): a
/// cgroup/sock_create program that tags every inet socket of the cgroup with sk_priority `tag`
/// (7 ... INT32_MAX; above 6 needs CAP_NET_ADMIN, so no app can forge it), and
/// connect4/connect6/sendmsg4/sendmsg6 programs that refuse, with EPERM, a connect or an
/// unconnected UDP send to 127.0.0.0/8, 0.0.0.0/8, ::1, :: or their v4-mapped forms, unless the
/// destination port is one of `ports` or the socket that would receive it carries `tag`.
/// Returns the fd of its counter (as appd_cgroup_deny_port_binds), or -1 with errno set.
int appd_cgroup_guard_loopback(int cgroup_fd, const uint16_t *ports, int port_count, uint32_t tag);

/// Reads the counter of appd_cgroup_guard_loopback: refusals so far, and the port (host order),
/// socket type and address family of the last one. 0, or -1 with errno set.
int appd_connect_counter_read(int counter, uint64_t *refused, uint32_t *port, uint32_t *type, uint32_t *family);

/// Whether `path` is on a cgroup2 filesystem (statfs f_type CGROUP2_SUPER_MAGIC): 1, 0, or -1
/// with errno set. Swift's Glibc module does not export statfs.
int appd_is_cgroup2(const char *path);

#endif
