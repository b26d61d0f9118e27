#ifndef CGUNZIP_H
#define CGUNZIP_H

#include <stddef.h>
#include <stdint.h>

/// A gzip inflater (zlib, RFC 1952 headers and trailers checked), behind an opaque pointer.
typedef struct appd_gunzip appd_gunzip;

/// NULL when zlib cannot start (out of memory).
appd_gunzip *appd_gunzip_new(void);
void appd_gunzip_free(appd_gunzip *g);
/// Ready for the next gzip member.
int appd_gunzip_reset(appd_gunzip *g);

enum { APPD_GUNZIP_OK = 0, APPD_GUNZIP_MEMBER_END = 1, APPD_GUNZIP_ERROR = -1 };

/// Inflates from `in` into `out`; `consumed`/`produced` say how much of each was used.
/// MEMBER_END: this member's trailer was read and its CRC-32 and length matched.
int appd_gunzip_step(appd_gunzip *g, const uint8_t *in, size_t in_len, size_t *consumed,
                     uint8_t *out, size_t out_len, size_t *produced);
/// zlib's words for the last error, or "" (never NULL).
const char *appd_gunzip_message(const appd_gunzip *g);

#endif
