// zlib's inflate for gzip'd tars given to `appd install`. In C because zlib keeps a pointer
// back to its z_stream and checks it on every call: the stream must stay at one address,
// which a Swift struct passed inout does not promise; and because ZIPFoundation's own zlib
// module is not a product other targets may import.
#define _GNU_SOURCE
#include "cgunzip.h"

#include <limits.h>
#include <stdlib.h>
#include <zlib.h>

struct appd_gunzip {
    z_stream stream;
    int last;
};

appd_gunzip *appd_gunzip_new(void) {
    appd_gunzip *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    // 16 + 15: a gzip header and trailer around a deflate stream with zlib's largest window.
    if (inflateInit2(&g->stream, 16 + MAX_WBITS) != Z_OK) {
        free(g);
        return NULL;
    }
    return g;
}

void appd_gunzip_free(appd_gunzip *g) {
    if (!g) return;
    inflateEnd(&g->stream);
    free(g);
}

int appd_gunzip_reset(appd_gunzip *g) {
    return inflateReset(&g->stream) == Z_OK ? APPD_GUNZIP_OK : APPD_GUNZIP_ERROR;
}

int appd_gunzip_step(appd_gunzip *g, const uint8_t *in, size_t in_len, size_t *consumed,
                     uint8_t *out, size_t out_len, size_t *produced) {
    uInt in_avail = in_len > UINT_MAX ? UINT_MAX : (uInt)in_len;
    uInt out_avail = out_len > UINT_MAX ? UINT_MAX : (uInt)out_len;
    g->stream.next_in = (Bytef *)in;
    g->stream.avail_in = in_avail;
    g->stream.next_out = out;
    g->stream.avail_out = out_avail;
    int result = inflate(&g->stream, Z_NO_FLUSH);
    g->last = result;
    *consumed = in_avail - g->stream.avail_in;
    *produced = out_avail - g->stream.avail_out;
    g->stream.next_in = NULL;
    g->stream.next_out = NULL;
    switch (result) {
    case Z_OK:
    case Z_BUF_ERROR:  // no progress possible with what was given: more input is needed
        return APPD_GUNZIP_OK;
    case Z_STREAM_END:
        return APPD_GUNZIP_MEMBER_END;
    default:
        return APPD_GUNZIP_ERROR;
    }
}

const char *appd_gunzip_message(const appd_gunzip *g) {
    return g->stream.msg ? g->stream.msg : "";
}
