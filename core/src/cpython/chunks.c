/* Local copies of a thread's data-stack chunks.
 *
 * CPython allocates the frames of a thread's function calls in a list of
 * _PyStackChunk blocks.  Copying the chunks a walk needs, each with one
 * read, serves every frame in them; frames elsewhere (a generator's or
 * coroutine's own frame, an entry frame on the C stack) are read one by
 * one by the caller.  The buffer is reused from thread to thread and from
 * walk to walk.
 */
#include "../internal.h"

#include <stdlib.h>

/* _PyStackChunk, unchanged since 3.11: previous, size (bytes, header
 * included), top, then the frames' memory. */
#define CHUNK_PREVIOUS 0
#define CHUNK_SIZE 8
#define CHUNK_HEADER 24
#define CHUNK_FIRST_READ (16u << 10) /* CPython's minimum chunk size */
#define MAX_CHUNKS 64
#define MAX_CHUNK_BYTES (32u << 20) /* copied per thread at most */

struct pyu_chunks {
    uint8_t *buf; /* owned */
    size_t cap, used;
    struct {
        uint64_t start, end; /* remote range [start, end) */
        size_t at;           /* its copy is buf + at */
    } chunk[MAX_CHUNKS];
    size_t n;
    uint64_t next;      /* remote address of the next chunk to copy, or 0 */
    uint64_t first_end; /* end of the innermost frame: the first chunk is
                           copied up to it */
};

void pyu_chunks_reset(pyu_session *s, uint64_t chunk, uint64_t used_end)
{
    struct pyu_chunks *v = s->chunks;
    if (!v && !(v = s->chunks = calloc(1, sizeof *v)))
        return; /* frames are then read one by one */
    v->n = 0;
    v->used = 0;
    v->next = chunk;
    v->first_end = used_end;
}

static bool reserve(struct pyu_chunks *v, size_t more)
{
    if (v->used + more <= v->cap)
        return true;
    size_t ncap = v->cap ? v->cap : 64u << 10;
    while (ncap < v->used + more)
        ncap *= 2;
    uint8_t *nb = realloc(v->buf, ncap);
    if (!nb)
        return false;
    v->buf = nb;
    v->cap = ncap;
    return true;
}

/* Copies the next chunk of the list; false when there is none or it cannot
 * be read. */
static bool copy_next(pyu_session *s, struct pyu_chunks *v)
{
    uint64_t at = v->next;
    v->next = 0;
    if (!at || (at & 7) || v->n >= MAX_CHUNKS)
        return false;
    size_t first = CHUNK_FIRST_READ;
    /* The current chunk is used up to its innermost frame: copy no more
     * (shallow stacks fill a fraction of a chunk). */
    bool partial = false;
    if (v->n == 0 && v->first_end > at + CHUNK_HEADER &&
        v->first_end - at < first) {
        first = (size_t)(v->first_end - at);
        partial = true;
    }
    if (v->used + first > MAX_CHUNK_BYTES || !reserve(v, first))
        return false;
    if (pyu_read_quiet(s, at, v->buf + v->used, first) < 0) {
        first = CHUNK_HEADER; /* a smaller chunk near a mapping's end */
        if (pyu_read_quiet(s, at, v->buf + v->used, first) < 0)
            return false;
    }
    uint8_t *c = v->buf + v->used;
    uint64_t size = pyu_u64(c, first, CHUNK_SIZE);
    uint64_t prev = pyu_u64(c, first, CHUNK_PREVIOUS);
    if (size < CHUNK_HEADER || size > MAX_CHUNK_BYTES ||
        v->used + size > MAX_CHUNK_BYTES)
        return false;
    if (partial && size >= first) {
        size = first; /* the part in use */
    } else if (size > first) {
        if (!reserve(v, (size_t)size))
            return false;
        c = v->buf + v->used;
        if (pyu_read_quiet(s, at + first, c + first, (size_t)size - first) <
            0)
            return false;
    }
    v->chunk[v->n].start = at;
    v->chunk[v->n].end = at + size;
    v->chunk[v->n].at = v->used;
    v->n++;
    v->used += (size_t)size;
    v->next = prev;
    return true;
}

const uint8_t *pyu_chunks_find(pyu_session *s, uint64_t addr, size_t len,
                               pyu_chunk_span *span)
{
    struct pyu_chunks *v = s->chunks;
    if (!v)
        return NULL;
    for (size_t i = 0;; i++) {
        if (i == v->n && !copy_next(s, v))
            return NULL;
        if (addr >= v->chunk[i].start && addr < v->chunk[i].end &&
            v->chunk[i].end - addr >= len) {
            span->start = v->chunk[i].start;
            span->end = v->chunk[i].end;
            span->local = v->buf + v->chunk[i].at;
            return span->local + (addr - span->start);
        }
    }
}

void pyu_chunks_free(pyu_session *s)
{
    if (s->chunks)
        free(s->chunks->buf);
    free(s->chunks);
    s->chunks = NULL;
}
