#define _GNU_SOURCE
#include "clinux_bpf.h"
#include "bpf_shared.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

// The loopback guard (docs/sandbox-layers.md, "Loopback"): cgroup programs that refuse an app
// on the host's network a connect(2) or sendmsg(2) to 127.0.0.0/8, 0.0.0.0/8 (which Linux
// delivers locally), ::1, :: and their v4-mapped forms, unless the port is allowed or the
// socket that would receive it is one of the instance's own. Own sockets carry a tag in
// sk_priority, set at socket creation (a cgroup/sock_create program) and read back from the
// socket a bpf_sk_lookup finds; priorities above 6 need CAP_NET_ADMIN, so no other app can
// forge it. Written as raw instructions like the bind filter: no clang or libbpf at build time.

static int bpf(int command, union bpf_attr *attr) {
    return (int)syscall(SYS_bpf, command, attr, sizeof *attr);
}

/// What the guard counts: refusals, and the port (network order), socket type and address
/// family of the last one.
struct appd_connect_counter {
    uint64_t refused;
    uint32_t port;
    uint32_t type;
    uint32_t family;
    uint32_t unused;
};

enum { maximum_instructions = 256 };

/// A program being written: instructions, and jumps waiting for their label.
struct program {
    struct bpf_insn insns[maximum_instructions];
    int count;
    int labels[16];
    struct { int at; int label; } fixups[64];
    int fixup_count;
    int overflow;
};

enum label { ALLOW, REFUSE, DENY, V6_NATIVE, LOOP4, LOOP6, TCP, FOUND, label_count };

static void emit(struct program *p, uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    if (p->count >= maximum_instructions) { p->overflow = 1; return; }
    p->insns[p->count++] = (struct bpf_insn){.code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
}

/// A conditional jump (or, with `code` BPF_JA, an unconditional one) to `label`.
static void jump(struct program *p, uint8_t code, uint8_t dst, uint8_t src, int32_t imm, enum label label) {
    if (p->fixup_count >= 64) { p->overflow = 1; return; }
    p->fixups[p->fixup_count].at = p->count;
    p->fixups[p->fixup_count++].label = label;
    emit(p, BPF_JMP | code, dst, src, 0, imm);
}

static void place(struct program *p, enum label label) { p->labels[label] = p->count; }

static int link_jumps(struct program *p) {
    for (int i = 0; i < p->fixup_count; i++) {
        int target = p->labels[p->fixups[i].label];
        if (target < 0) return -1;
        p->insns[p->fixups[i].at].off = (int16_t)(target - p->fixups[i].at - 1);
    }
    return p->overflow ? -1 : 0;
}

#define MOV64_REG(d, s) emit(p, BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV64_IMM(d, i) emit(p, BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define MOV32_IMM(d, i) emit(p, BPF_ALU | BPF_MOV | BPF_K, d, 0, 0, (int32_t)(i))
#define LOAD(size, d, s, o) emit(p, BPF_LDX | BPF_MEM | size, d, s, (int16_t)(o), 0)
#define STORE(size, d, s, o) emit(p, BPF_STX | BPF_MEM | size, d, s, (int16_t)(o), 0)
#define STORE_IMM(size, d, o, i) emit(p, BPF_ST | BPF_MEM | size, d, 0, (int16_t)(o), i)
#define CALL(f) emit(p, BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define CTX(field) offsetof(struct bpf_sock_addr, field)
#define SOCK(field) offsetof(struct bpf_sock, field)

// The stack: the lookup tuple at fp-40 (36 bytes, struct bpf_sock_tuple), the map key at fp-48.
enum { tuple_at = -40, key_at = -48 };

/// The ports the admin allows go through; else the lookup tuple is zeroed (r7 the port).
static void allow_ports_and_clear_tuple(struct program *p, const uint16_t *ports, int port_count) {
    for (int i = 0; i < port_count; i++) jump(p, BPF_JEQ | BPF_K, BPF_REG_7, 0, htons(ports[i]), ALLOW);
    for (int offset = tuple_at; offset < 0; offset += 8) STORE_IMM(BPF_DW, BPF_REG_10, offset, 0);
    LOAD(BPF_DW, BPF_REG_8, BPF_REG_6, CTX(sk));
}

/// IPv4: the first octet (the lowest byte of the network-order word) is 127 or 0. Then the
/// tuple, from the sending socket's own address and port (a connected UDP socket is found only
/// by its peer), and r3 its size.
static void match_ipv4(struct program *p, const uint16_t *ports, int port_count) {
    LOAD(BPF_W, BPF_REG_1, BPF_REG_6, CTX(user_ip4));
    emit(p, BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_1, 0, 0, 0xFF);
    jump(p, BPF_JEQ | BPF_K, BPF_REG_1, 0, 127, LOOP4);
    jump(p, BPF_JEQ | BPF_K, BPF_REG_1, 0, 0, LOOP4);
    jump(p, BPF_JA, 0, 0, 0, ALLOW);

    place(p, LOOP4);
    allow_ports_and_clear_tuple(p, ports, port_count);
    LOAD(BPF_W, BPF_REG_1, BPF_REG_8, SOCK(src_ip4));
    STORE(BPF_W, BPF_REG_10, BPF_REG_1, tuple_at + 0);
    LOAD(BPF_W, BPF_REG_1, BPF_REG_6, CTX(user_ip4));
    STORE(BPF_W, BPF_REG_10, BPF_REG_1, tuple_at + 4);
    LOAD(BPF_W, BPF_REG_1, BPF_REG_8, SOCK(src_port));  // host order
    emit(p, BPF_ALU | BPF_END | BPF_TO_BE, BPF_REG_1, 0, 0, 16);
    STORE(BPF_H, BPF_REG_10, BPF_REG_1, tuple_at + 8);
    STORE(BPF_H, BPF_REG_10, BPF_REG_7, tuple_at + 10);
    MOV64_IMM(BPF_REG_3, 12);  // sizeof tuple.ipv4
}

/// IPv6: ::1 and ::, or ::ffff:a.b.c.d with a of 127 or 0; then the tuple, as for IPv4.
static void match_ipv6(struct program *p, const uint16_t *ports, int port_count) {
    LOAD(BPF_W, BPF_REG_1, BPF_REG_6, CTX(user_ip6[0]));
    jump(p, BPF_JNE | BPF_K, BPF_REG_1, 0, 0, ALLOW);
    LOAD(BPF_W, BPF_REG_1, BPF_REG_6, CTX(user_ip6[1]));
    jump(p, BPF_JNE | BPF_K, BPF_REG_1, 0, 0, ALLOW);
    LOAD(BPF_W, BPF_REG_1, BPF_REG_6, CTX(user_ip6[2]));
    jump(p, BPF_JEQ | BPF_K, BPF_REG_1, 0, 0, V6_NATIVE);
    MOV32_IMM(BPF_REG_2, htonl(0x0000FFFF));  // zero-extended, unlike a 64-bit immediate
    jump(p, BPF_JNE | BPF_X, BPF_REG_1, BPF_REG_2, 0, ALLOW);
    LOAD(BPF_W, BPF_REG_1, BPF_REG_6, CTX(user_ip6[3]));
    emit(p, BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_1, 0, 0, 0xFF);
    jump(p, BPF_JEQ | BPF_K, BPF_REG_1, 0, 127, LOOP6);
    jump(p, BPF_JEQ | BPF_K, BPF_REG_1, 0, 0, LOOP6);
    jump(p, BPF_JA, 0, 0, 0, ALLOW);
    place(p, V6_NATIVE);
    LOAD(BPF_W, BPF_REG_1, BPF_REG_6, CTX(user_ip6[3]));
    jump(p, BPF_JEQ | BPF_K, BPF_REG_1, 0, 0, LOOP6);
    MOV32_IMM(BPF_REG_2, htonl(1));
    jump(p, BPF_JEQ | BPF_X, BPF_REG_1, BPF_REG_2, 0, LOOP6);
    jump(p, BPF_JA, 0, 0, 0, ALLOW);

    place(p, LOOP6);
    allow_ports_and_clear_tuple(p, ports, port_count);
    for (int word = 0; word < 4; word++) {
        LOAD(BPF_W, BPF_REG_1, BPF_REG_8, SOCK(src_ip6[0]) + 4 * word);
        STORE(BPF_W, BPF_REG_10, BPF_REG_1, tuple_at + 4 * word);
        LOAD(BPF_W, BPF_REG_1, BPF_REG_6, CTX(user_ip6[0]) + 4 * word);
        STORE(BPF_W, BPF_REG_10, BPF_REG_1, tuple_at + 16 + 4 * word);
    }
    LOAD(BPF_W, BPF_REG_1, BPF_REG_8, SOCK(src_port));
    emit(p, BPF_ALU | BPF_END | BPF_TO_BE, BPF_REG_1, 0, 0, 16);
    STORE(BPF_H, BPF_REG_10, BPF_REG_1, tuple_at + 32);
    STORE(BPF_H, BPF_REG_10, BPF_REG_7, tuple_at + 34);
    MOV64_IMM(BPF_REG_3, 36);  // sizeof tuple.ipv6
}

/// The connect/sendmsg program of one family (the verifier lets a v4 hook read only user_ip4,
/// a v6 hook only user_ip6): r6 ctx, r7 the port (network order), r8 and r9 scratch.
static void write_guard(struct program *p, int family, int counter, const uint16_t *ports, int port_count, uint32_t tag) {
    MOV64_REG(BPF_REG_6, BPF_REG_1);
    LOAD(BPF_W, BPF_REG_7, BPF_REG_6, CTX(user_port));
    if (family == AF_INET) match_ipv4(p, ports, port_count);
    else match_ipv6(p, ports, port_count);

    // Which socket would receive it, in this network namespace: one of the instance's own?
    LOAD(BPF_W, BPF_REG_9, BPF_REG_6, CTX(type));
    MOV64_REG(BPF_REG_1, BPF_REG_6);
    MOV64_REG(BPF_REG_2, BPF_REG_10);
    emit(p, BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, tuple_at);
    MOV64_IMM(BPF_REG_4, -1);  // BPF_F_CURRENT_NETNS
    MOV64_IMM(BPF_REG_5, 0);
    jump(p, BPF_JEQ | BPF_K, BPF_REG_9, 0, SOCK_STREAM, TCP);
    jump(p, BPF_JNE | BPF_K, BPF_REG_9, 0, SOCK_DGRAM, REFUSE);
    CALL(BPF_FUNC_sk_lookup_udp);
    jump(p, BPF_JA, 0, 0, 0, FOUND);
    place(p, TCP);
    CALL(BPF_FUNC_sk_lookup_tcp);
    place(p, FOUND);
    jump(p, BPF_JEQ | BPF_K, BPF_REG_0, 0, 0, REFUSE);
    LOAD(BPF_W, BPF_REG_8, BPF_REG_0, SOCK(priority));
    MOV64_REG(BPF_REG_1, BPF_REG_0);
    CALL(BPF_FUNC_sk_release);
    jump(p, BPF_JEQ | BPF_K, BPF_REG_8, 0, (int32_t)tag, ALLOW);

    // Refused: counted in element 0 of the counter, then EPERM.
    place(p, REFUSE);
    STORE_IMM(BPF_W, BPF_REG_10, key_at, 0);
    emit(p, BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, counter);
    emit(p, 0, 0, 0, 0, 0);
    MOV64_REG(BPF_REG_2, BPF_REG_10);
    emit(p, BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, key_at);
    CALL(BPF_FUNC_map_lookup_elem);
    jump(p, BPF_JEQ | BPF_K, BPF_REG_0, 0, 0, DENY);
    MOV64_IMM(BPF_REG_1, 1);
    emit(p, BPF_STX | BPF_ATOMIC | BPF_DW, BPF_REG_0, BPF_REG_1, 0, BPF_ADD);
    STORE(BPF_W, BPF_REG_0, BPF_REG_7, offsetof(struct appd_connect_counter, port));
    LOAD(BPF_W, BPF_REG_1, BPF_REG_6, CTX(type));
    STORE(BPF_W, BPF_REG_0, BPF_REG_1, offsetof(struct appd_connect_counter, type));
    MOV64_IMM(BPF_REG_1, family);
    STORE(BPF_W, BPF_REG_0, BPF_REG_1, offsetof(struct appd_connect_counter, family));
    place(p, DENY);
    MOV64_IMM(BPF_REG_0, 0);
    emit(p, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    place(p, ALLOW);
    MOV64_IMM(BPF_REG_0, 1);
    emit(p, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
}

static int load(struct program *p, enum bpf_prog_type type, enum bpf_attach_type attach, const char *name) {
    if (link_jumps(p) != 0) {
        errno = E2BIG;
        return -1;
    }
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.prog_type = type;
    attr.expected_attach_type = attach;
    attr.insns = (unsigned long)p->insns;
    attr.insn_cnt = (uint32_t)p->count;
    attr.license = (unsigned long)"GPL";
    strncpy(attr.prog_name, name, sizeof attr.prog_name - 1);
    return bpf(BPF_PROG_LOAD, &attr);
}

static int attach(int cgroup_fd, int program, enum bpf_attach_type type) {
    union bpf_attr link;
    memset(&link, 0, sizeof link);
    link.target_fd = (unsigned)cgroup_fd;
    link.attach_bpf_fd = (unsigned)program;
    link.attach_type = type;
    return bpf(BPF_PROG_ATTACH, &link);
}

static void close_keeping_errno(int fd) {
    int saved = errno;
    close(fd);
    errno = saved;
}

int appd_cgroup_guard_loopback(int cgroup_fd, const uint16_t *ports, int port_count, uint32_t tag) {
    if (port_count < 0 || port_count > APPD_LOOPBACK_PORTS_MAX || tag <= 6 || tag > INT32_MAX) {
        errno = EINVAL;
        return -1;
    }
    int counter = appd_bpf_create_counter(sizeof(struct appd_connect_counter), "appd_loopback");
    if (counter < 0) return -1;

    // Tagging first: a socket made before the guard runs is already the instance's.
    static struct program tagger;
    memset(&tagger, 0, sizeof tagger);
    struct program *p = &tagger;
    for (int i = 0; i < label_count; i++) p->labels[i] = -1;
    MOV32_IMM(BPF_REG_2, tag);
    STORE(BPF_W, BPF_REG_1, BPF_REG_2, SOCK(priority));
    MOV64_IMM(BPF_REG_0, 1);
    emit(p, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    int program = load(p, BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_CREATE, "appd_own_socket");
    if (program < 0 || attach(cgroup_fd, program, BPF_CGROUP_INET_SOCK_CREATE) < 0) goto failed;
    close(program);

    const enum bpf_attach_type hooks[] = {
        BPF_CGROUP_INET4_CONNECT, BPF_CGROUP_INET6_CONNECT, BPF_CGROUP_UDP4_SENDMSG,
        BPF_CGROUP_UDP6_SENDMSG,
    };
    static struct program guard;
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++) {
        memset(&guard, 0, sizeof guard);
        for (int j = 0; j < label_count; j++) guard.labels[j] = -1;
        int family = hooks[i] == BPF_CGROUP_INET4_CONNECT || hooks[i] == BPF_CGROUP_UDP4_SENDMSG ? AF_INET : AF_INET6;
        write_guard(&guard, family, counter, ports, port_count, tag);
        program = load(&guard, BPF_PROG_TYPE_CGROUP_SOCK_ADDR, hooks[i], "appd_loopback");
        if (program < 0 || attach(cgroup_fd, program, hooks[i]) < 0) goto failed;
        // The attachment holds the program (and the program its counter).
        close(program);
    }
    return counter;

failed:
    if (program >= 0) close_keeping_errno(program);
    close_keeping_errno(counter);
    return -1;
}

int appd_connect_counter_read(int counter, uint64_t *refused, uint32_t *port, uint32_t *type, uint32_t *family) {
    struct appd_connect_counter value;
    memset(&value, 0, sizeof value);
    if (appd_bpf_read_counter(counter, &value) != 0) return -1;
    *refused = value.refused;
    *port = ntohs((uint16_t)value.port);
    *type = value.type;
    *family = value.family;
    return 0;
}
