/* Fuzz harness: finding the runtime and validating its debug offsets
 * (_Py_DebugOffsets, every version and build), then the walk: the input
 * is the memory at the runtime's address (up to 64 KiB), laid over a base
 * snapshot of a real process (snap.h) named by $PYU_FUZZ_BASE, so that
 * offsets that pass lead into real memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snap.h"

static snap S;
static uint8_t *base;
static size_t base_len;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *path = getenv("PYU_FUZZ_BASE");
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        fprintf(stderr, "fuzz_offsets: set PYU_FUZZ_BASE to a snapshot "
                        "(scripts/fuzz does)\n");
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    base_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    base = malloc(base_len);
    if (!base || fread(base, 1, base_len, f) != base_len)
        exit(2);
    fclose(f);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    if (len > 65536 || snap_parse(&S, base, base_len) < 0)
        return 0;
    S.nmaps = 0; /* (no mappings: the runtime is where the base says, not
                    searched for in the interpreter's files every time) */
    /* the input replaces the memory at the runtime's address; what it
     * does not cover faults */
    for (size_t i = 0; i < S.nranges; i++) {
        snap_range *r = &S.ranges[i];
        if (S.runtime >= r->addr && S.runtime - r->addr < r->len) {
            size_t off = (size_t)(S.runtime - r->addr);
            size_t n = r->len - off < len ? r->len - off : len;
            memcpy(S.data[i] + off, in, n);
            memset(S.data[i] + off + n, 0, r->len - off - n);
            r->len = (uint32_t)(off + n);
        }
    }
    pyu_session *s = pyu_session_new();
    if (s && pyu_open_memory(s, &snap_ops, &S, S.pid, S.runtime) == 0) {
        pyu_dump *d = NULL;
        pyu_dump_take(s, 0, &d);
        pyu_dump_free(d);
    }
    pyu_session_free(s);
    snap_free(&S);
    return 0;
}
