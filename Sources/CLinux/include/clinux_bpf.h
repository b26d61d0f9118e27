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

/// Whether `path` is on a cgroup2 filesystem (statfs f_type CGROUP2_SUPER_MAGIC): 1, 0, or -1
/// with errno set. Swift's Glibc module does not export statfs.
int appd_is_cgroup2(const char *path);

#endif
