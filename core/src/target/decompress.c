/* Compressed core files: zstd (systemd-coredump's default), xz, lz4 and
 * gzip, told apart by their first bytes (not the file's name) and
 * decompressed into an unnamed temporary file, sparse where the core is
 * zeros, which the ELF reader then maps like any core.
 *
 * The temporary file is made in $TMPDIR, else /var/tmp (a core can be far
 * larger than a RAM-backed /tmp), with O_TMPFILE so that nothing is left
 * behind, whatever ends the process.  A stream that ends before its last
 * frame (a copy cut short) or whose data is damaged is an error that says
 * which, at which byte; so is a full disk.
 */
#include "../internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lz4frame.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define CHUNK (1u << 20)
#define BLOCK 4096u /* zeros this long and aligned are not written */
#define MAX_OUT (1ull << 38) /* 256 GiB of core: more is not a core */

typedef enum { NONE, ZSTD, XZ, LZ4, GZIP } kind;
static const char *const kind_names[] = {"", "zstd", "xz", "lz4", "gzip"};

static kind detect(const uint8_t *b, size_t n)
{
    if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd)
        return ZSTD;
    if (n >= 6 && memcmp(b, "\xfd" "7zXZ\0", 6) == 0)
        return XZ;
    if (n >= 4 && b[0] == 0x04 && b[1] == 0x22 && b[2] == 0x4d && b[3] == 0x18)
        return LZ4;
    if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        return GZIP;
    return NONE;
}

/* The decompression: the input file, the output file and where each is. */
typedef struct job {
    int in, out;
    const char *path;
    kind k;
    uint64_t in_at;  /* bytes of the compressed file consumed */
    uint64_t out_at; /* bytes of core written (zeros skipped included) */
    uint8_t *ibuf, *obuf;
    size_t ilen, ipos; /* the input buffer's data and its read position */
    bool eof;
    pyu_err *err;
} job;

static int fill(job *j)
{
    if (j->ipos < j->ilen || j->eof)
        return 0;
    ssize_t n;
    do
        n = read(j->in, j->ibuf, CHUNK);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return pyu_err_set(j->err, PYU_E_IO, "%s: reading it failed: %s",
                           j->path, strerror(errno));
    j->ilen = (size_t)n;
    j->ipos = 0;
    j->eof = n == 0;
    return 0;
}

static bool zeros(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* Writes n bytes of core; aligned blocks of zeros become holes. */
static int put(job *j, const uint8_t *p, size_t n)
{
    if (j->out_at + n > MAX_OUT)
        return pyu_err_set(j->err, PYU_E_BADCORE,
                           "%s: the %s stream holds more than %llu GiB: not "
                           "a core file pyunwind reads",
                           j->path, kind_names[j->k], MAX_OUT >> 30);
    while (n) {
        size_t room = BLOCK - (size_t)(j->out_at % BLOCK);
        size_t len = n < room ? n : room;
        if (!(len == BLOCK && zeros(p, len))) {
            size_t done = 0;
            while (done < len) {
                ssize_t w = pwrite(j->out, p + done, len - done,
                                   (off_t)(j->out_at + done));
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0)
                    return pyu_err_set(
                        j->err, PYU_E_IO,
                        "%s: writing its %s-decompressed copy failed after "
                        "%" PRIu64 " bytes: %s (set TMPDIR to a directory "
                        "with room for the whole core)",
                        j->path, kind_names[j->k], j->out_at + done,
                        w < 0 ? strerror(errno) : "nothing written");
                done += (size_t)w;
            }
        }
        j->out_at += len;
        p += len;
        n -= len;
    }
    return 0;
}

static int cut(job *j)
{
    return pyu_err_set(j->err, PYU_E_BADCORE,
                       "%s: the %s stream is cut off after %" PRIu64
                       " bytes (%" PRIu64 " bytes of core decompressed): "
                       "the file is incomplete; copy it again",
                       j->path, kind_names[j->k], j->in_at, j->out_at);
}

static int damaged(job *j, const char *why)
{
    return pyu_err_set(j->err, PYU_E_BADCORE,
                       "%s: the %s stream is damaged near byte %" PRIu64
                       " (%s)",
                       j->path, kind_names[j->k], j->in_at, why);
}

static int run_zstd(job *j)
{
    ZSTD_DStream *z = ZSTD_createDStream();
    if (!z)
        return pyu_err_set(j->err, PYU_E_NOMEM, "out of memory");
    size_t want = ZSTD_initDStream(z); /* 0: a frame ended, all flushed */
    int rc = 0;
    while (rc == 0) {
        if ((rc = fill(j)) < 0)
            break;
        if (j->eof) {
            if (want != 0)
                rc = cut(j);
            break;
        }
        ZSTD_inBuffer in = {j->ibuf, j->ilen, j->ipos};
        size_t got;
        do { /* (a full output buffer: the decoder may hold more) */
            ZSTD_outBuffer out = {j->obuf, CHUNK, 0};
            size_t before = in.pos;
            want = ZSTD_decompressStream(z, &out, &in);
            j->in_at += in.pos - before;
            got = out.pos;
            rc = ZSTD_isError(want) ? damaged(j, ZSTD_getErrorName(want))
                                    : put(j, j->obuf, got);
        } while (rc == 0 && (in.pos < in.size || got == CHUNK));
        j->ipos = in.pos;
    }
    ZSTD_freeDStream(z);
    return rc;
}

static int run_xz(job *j)
{
    lzma_stream z = LZMA_STREAM_INIT;
    if (lzma_stream_decoder(&z, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
        return pyu_err_set(j->err, PYU_E_NOMEM, "out of memory");
    int rc = 0;
    for (;;) {
        if ((rc = fill(j)) < 0)
            break;
        z.next_in = j->ibuf + j->ipos;
        z.avail_in = j->ilen - j->ipos;
        z.next_out = j->obuf;
        z.avail_out = CHUNK;
        size_t before = z.avail_in;
        lzma_ret r = lzma_code(&z, j->eof ? LZMA_FINISH : LZMA_RUN);
        j->in_at += before - z.avail_in;
        j->ipos = j->ilen - z.avail_in;
        if ((rc = put(j, j->obuf, CHUNK - z.avail_out)) < 0)
            break;
        if (r == LZMA_STREAM_END)
            break;
        if (r == LZMA_BUF_ERROR && j->eof) {
            rc = cut(j);
            break;
        }
        if (r != LZMA_OK) {
            rc = r == LZMA_MEM_ERROR
                     ? pyu_err_set(j->err, PYU_E_NOMEM, "out of memory")
                     : damaged(j, r == LZMA_DATA_ERROR     ? "data error"
                                  : r == LZMA_FORMAT_ERROR ? "not xz"
                                                           : "bad header");
            break;
        }
    }
    lzma_end(&z);
    return rc;
}

static int run_gzip(job *j)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return pyu_err_set(j->err, PYU_E_NOMEM, "out of memory");
    int rc = 0;
    bool ended = false; /* a member ended (another may follow, as gzip
                           writes them when files are concatenated) */
    for (;;) {
        if ((rc = fill(j)) < 0)
            break;
        size_t avail = j->ilen - j->ipos;
        if (ended && j->eof)
            break;
        if (ended && avail) {
            inflateReset(&z);
            ended = false;
        }
        z.next_in = j->ibuf + j->ipos;
        z.avail_in = (uInt)avail;
        z.next_out = j->obuf;
        z.avail_out = CHUNK;
        int r = inflate(&z, Z_NO_FLUSH);
        j->in_at += avail - z.avail_in;
        j->ipos = j->ilen - z.avail_in;
        size_t got = CHUNK - z.avail_out;
        if ((rc = put(j, j->obuf, got)) < 0)
            break;
        if (r == Z_STREAM_END) {
            ended = true;
        } else if (r == Z_BUF_ERROR || (r == Z_OK && !got && !avail)) {
            if (j->eof) { /* (all flushed, and the member goes on) */
                rc = cut(j);
                break;
            }
        } else if (r != Z_OK) {
            rc = r == Z_MEM_ERROR
                     ? pyu_err_set(j->err, PYU_E_NOMEM, "out of memory")
                     : damaged(j, z.msg ? z.msg : "data error");
            break;
        }
    }
    inflateEnd(&z);
    return rc;
}

static int run_lz4(job *j)
{
    LZ4F_dctx *z;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&z, LZ4F_VERSION)))
        return pyu_err_set(j->err, PYU_E_NOMEM, "out of memory");
    size_t want = 1; /* 0: a frame ended, all flushed */
    int rc = 0;
    for (;;) {
        if ((rc = fill(j)) < 0)
            break;
        if (j->eof && want == 0) /* (a frame ended, all flushed) */
            break;
        size_t ilen = j->ilen - j->ipos, olen = CHUNK;
        want = LZ4F_decompress(z, j->obuf, &olen, j->ibuf + j->ipos, &ilen,
                               NULL);
        j->ipos += ilen;
        j->in_at += ilen;
        if (LZ4F_isError(want)) {
            rc = damaged(j, LZ4F_getErrorName(want));
            break;
        }
        if ((rc = put(j, j->obuf, olen)) < 0)
            break;
        if (j->eof && olen == 0 && want != 0) { /* (nothing held back) */
            rc = cut(j);
            break;
        }
    }
    LZ4F_freeDecompressionContext(z);
    return rc;
}

/* An unnamed file for the copy. */
static int temp_file(const char *path, pyu_err *err)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/var/tmp";
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) { /* (a file system without O_TMPFILE) */
        char name[4096];
        snprintf(name, sizeof name, "%s/pyunwind-core-XXXXXX", dir);
        fd = mkostemp(name, O_CLOEXEC);
        if (fd >= 0)
            unlink(name);
    }
    if (fd < 0)
        pyu_err_set(err, PYU_E_IO,
                    "%s is compressed, and no file for its decompressed "
                    "copy can be made in %s: %s (set TMPDIR to a writable "
                    "directory)",
                    path, dir, strerror(errno));
    return fd;
}

int pyu_core_decompress(int fd, const char *path, int *out, pyu_err *err)
{
    *out = -1;
    uint8_t head[8];
    ssize_t n = pread(fd, head, sizeof head, 0);
    kind k = n > 0 ? detect(head, (size_t)n) : NONE;
    if (k == NONE)
        return 0;
    job j = {.in = fd, .path = path, .k = k, .err = err};
    int rc;
    if ((j.out = temp_file(path, err)) < 0)
        return -PYU_E_IO;
    j.ibuf = malloc(CHUNK);
    j.obuf = malloc(CHUNK);
    if (!j.ibuf || !j.obuf) {
        rc = pyu_err_set(err, PYU_E_NOMEM, "out of memory");
    } else if (lseek(fd, 0, SEEK_SET) < 0) {
        rc = pyu_err_set(err, PYU_E_IO, "%s: %s", path, strerror(errno));
    } else {
        rc = k == ZSTD ? run_zstd(&j)
             : k == XZ ? run_xz(&j)
             : k == LZ4 ? run_lz4(&j)
                        : run_gzip(&j);
    }
    if (rc == 0 && ftruncate(j.out, (off_t)j.out_at) < 0)
        rc = pyu_err_set(err, PYU_E_IO, "%s: sizing its decompressed copy "
                         "failed: %s", path, strerror(errno));
    if (rc == 0 && j.out_at == 0)
        rc = pyu_err_set(err, PYU_E_BADCORE, "%s: the %s stream holds "
                         "nothing, not a core file", path, kind_names[k]);
    free(j.ibuf);
    free(j.obuf);
    if (rc < 0) {
        close(j.out);
        return rc;
    }
    *out = j.out;
    return 0;
}
