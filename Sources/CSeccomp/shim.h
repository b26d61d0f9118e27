#ifndef APPD_CSECCOMP_H
#define APPD_CSECCOMP_H

#include <seccomp.h>

// SCMP_ACT_ERRNO and friends are function-like macros, which Swift cannot import.
static inline uint32_t appd_scmp_act_errno(uint16_t code) { return SCMP_ACT_ERRNO(code); }

// seccomp_rule_add is variadic; Swift calls seccomp_rule_add_array with these instead of the
// SCMP_A0..SCMP_A5 macros.
static inline struct scmp_arg_cmp appd_scmp_arg(unsigned int arg, enum scmp_compare op,
                                                scmp_datum_t a, scmp_datum_t b) {
    struct scmp_arg_cmp cmp = {arg, op, a, b};
    return cmp;
}

#endif
