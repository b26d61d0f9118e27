#define _GNU_SOURCE
#include "clinux_bpf.h"

#include <errno.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

static int bpf(int command, union bpf_attr *attr) {
    return (int)syscall(SYS_bpf, command, attr, sizeof *attr);
}

// r2 = ctx->user_port (network order; 0 = "any port"); if r2 == 0 return 1 (allow); return 0
// (refuse: the kernel answers bind with EPERM).
static const struct bpf_insn deny_port_binds[] = {
    {.code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_1,
        .off = offsetof(struct bpf_sock_addr, user_port)},
    {.code = BPF_JMP | BPF_JEQ | BPF_K, .dst_reg = BPF_REG_2, .off = 2, .imm = 0},
    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
    {.code = BPF_JMP | BPF_EXIT},
    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1},
    {.code = BPF_JMP | BPF_EXIT},
};

static int attach(int cgroup_fd, enum bpf_attach_type type) {
    union bpf_attr load;
    memset(&load, 0, sizeof load);
    load.prog_type = BPF_PROG_TYPE_CGROUP_SOCK_ADDR;
    load.expected_attach_type = type;
    load.insns = (unsigned long)deny_port_binds;
    load.insn_cnt = sizeof deny_port_binds / sizeof deny_port_binds[0];
    load.license = (unsigned long)"GPL";
    strncpy(load.prog_name, "appd_no_bind", sizeof load.prog_name - 1);
    int program = bpf(BPF_PROG_LOAD, &load);
    if (program < 0) return -1;

    union bpf_attr link;
    memset(&link, 0, sizeof link);
    link.target_fd = (unsigned)cgroup_fd;
    link.attach_bpf_fd = (unsigned)program;
    link.attach_type = type;
    int result = bpf(BPF_PROG_ATTACH, &link);
    int saved = errno;
    // The attachment holds the program; the fd is not needed any more.
    close(program);
    errno = saved;
    return result;
}

int appd_cgroup_deny_port_binds(int cgroup_fd) {
    if (attach(cgroup_fd, BPF_CGROUP_INET4_BIND) < 0) return -1;
    return attach(cgroup_fd, BPF_CGROUP_INET6_BIND);
}

int appd_is_cgroup2(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return info.f_type == CGROUP2_SUPER_MAGIC;
}
