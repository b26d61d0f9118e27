#ifndef APPD_CLINUX_BPF_SHARED_H
#define APPD_CLINUX_BPF_SHARED_H

// What bpf.c and bpf_loopback.c share; not part of the module Swift sees (include/).

/// A one-element BPF array map of `value_size` bytes, named `name`: a filter's counter. Its fd,
/// or -1 with errno set.
int appd_bpf_create_counter(unsigned value_size, const char *name);

/// Reads element 0 of the one-element BPF array map `map` into `value` (the map's value size).
/// 0, or -1 with errno set.
int appd_bpf_read_counter(int map, void *value);

#endif
