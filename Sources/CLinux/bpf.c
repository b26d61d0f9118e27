#define _GNU_SOURCE
#include "clinux_bpf.h"
#include "bpf_shared.h"

#include <errno.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <unistd.h>

static int bpf(int command, union bpf_attr *attr) {
    return (int)syscall(SYS_bpf, command, attr, sizeof *attr);
}

/// The counter the filter keeps: how many binds it refused, and the port and socket type of the
/// last one (what the daemon's denial log reports, docs/denials.md).
struct appd_bind_counter {
    uint64_t refused;
    uint32_t port;  // network order, as user_port
    uint32_t type;  // SOCK_STREAM, SOCK_DGRAM
};

int appd_bpf_create_counter(unsigned value_size, const char *name) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = sizeof(uint32_t);
    attr.value_size = value_size;
    attr.max_entries = 1;
    strncpy(attr.map_name, name, sizeof attr.map_name - 1);
    return bpf(BPF_MAP_CREATE, &attr);
}

#define INSN(c, d, s, o, i) {.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)}

/// allow (return 1) a bind of port 0 (the kernel picks one, as connect does); refuse (return 0:
/// the kernel answers bind with EPERM) any other, counting it in element 0 of `counter`.
static int load(int counter, enum bpf_attach_type type) {
    struct bpf_insn program[] = {
        INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0),                               // r6 = ctx
        INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_7, BPF_REG_6, offsetof(struct bpf_sock_addr, user_port), 0),
        INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_7, 0, 14, 0),                                        // port 0: allow
        INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_8, BPF_REG_6, offsetof(struct bpf_sock_addr, type), 0),
        INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, 0),                                        // key 0
        INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, counter),                  // r1 = map
        INSN(0, 0, 0, 0, 0),
        INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0),
        INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4),
        INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
        INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 4, 0),                                         // no element: refuse
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, 1),
        INSN(BPF_STX | BPF_ATOMIC | BPF_DW, BPF_REG_0, BPF_REG_1, 0, BPF_ADD),                       // refused += 1
        INSN(BPF_STX | BPF_MEM | BPF_W, BPF_REG_0, BPF_REG_7, 8, 0),                                 // port
        INSN(BPF_STX | BPF_MEM | BPF_W, BPF_REG_0, BPF_REG_8, 12, 0),                                // type
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0),                                       // refuse
        INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1),                                       // allow
        INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
    };
    union bpf_attr load;
    memset(&load, 0, sizeof load);
    load.prog_type = BPF_PROG_TYPE_CGROUP_SOCK_ADDR;
    load.expected_attach_type = type;
    load.insns = (unsigned long)program;
    load.insn_cnt = sizeof program / sizeof program[0];
    load.license = (unsigned long)"GPL";
    strncpy(load.prog_name, "appd_no_bind", sizeof load.prog_name - 1);
    return bpf(BPF_PROG_LOAD, &load);
}

static int attach(int cgroup_fd, int counter, enum bpf_attach_type type) {
    int program = load(counter, type);
    if (program < 0) return -1;
    union bpf_attr link;
    memset(&link, 0, sizeof link);
    link.target_fd = (unsigned)cgroup_fd;
    link.attach_bpf_fd = (unsigned)program;
    link.attach_type = type;
    int result = bpf(BPF_PROG_ATTACH, &link);
    int saved = errno;
    // The attachment holds the program (and the program its counter); the fd is not needed.
    close(program);
    errno = saved;
    return result;
}

int appd_cgroup_deny_port_binds(int cgroup_fd) {
    int counter = appd_bpf_create_counter(sizeof(struct appd_bind_counter), "appd_binds");
    if (counter < 0) return -1;
    if (attach(cgroup_fd, counter, BPF_CGROUP_INET4_BIND) < 0 || attach(cgroup_fd, counter, BPF_CGROUP_INET6_BIND) < 0) {
        int saved = errno;
        close(counter);
        errno = saved;
        return -1;
    }
    return counter;
}

int appd_bpf_read_counter(int map, void *value) {
    uint32_t key = 0;
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_fd = (unsigned)map;
    attr.key = (unsigned long)&key;
    attr.value = (unsigned long)value;
    return bpf(BPF_MAP_LOOKUP_ELEM, &attr);
}

int appd_bind_counter_read(int counter, uint64_t *refused, uint32_t *port, uint32_t *type) {
    struct appd_bind_counter value;
    memset(&value, 0, sizeof value);
    if (appd_bpf_read_counter(counter, &value) != 0) return -1;
    *refused = value.refused;
    *port = ntohs((uint16_t)value.port);
    *type = value.type;
    return 0;
}

int appd_is_cgroup2(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return info.f_type == CGROUP2_SUPER_MAGIC;
}
