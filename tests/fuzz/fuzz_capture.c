/* Fuzz harness: captures, as `pyunwind report` reads them (files of
 * unknown origin: a cut or damaged one must be kept up to its last whole
 * sample or refused in one line, never crash).  The input's first byte
 * picks a filter (thread, pid, mode, time window), the rest is the capture;
 * what was kept is then written in every format that needs no files,
 * also from its copy by line (what the formats without instructions are
 * written from) and against itself as a differential flame graph. */
#include <stdio.h>
#include <stdlib.h>

#include "pyunwind/pyunwind.h"

static void write_all(pyu_profile *p, FILE *f)
{
    pyu_profile_write_collapsed(p, f);
    pyu_profile_write_top(p, f, PYU_TOP_SORT_TOTAL, 5);
    pyu_profile_write_json(p, f);
    pyu_profile_write_pprof(p, f);
    pyu_profile_write_speedscope(p, f);
    pyu_profile_write_gecko(p, f);
    pyu_profile_write_raw(p, f);
    pyu_profile_write_flamegraph(p, f);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    if (len < 2)
        return 0;
    unsigned sel = in[0];
    pyu_capture_filter w = {.mode = -1};
    if (sel & 1)
        w.thread = sel >> 4; /* (small ids: threads of the seeds rarely) */
    if (sel & 2)
        w.mode = (int)(sel >> 2 & 3);
    if ((sel & 3) == 3)
        w.pid = (int)(sel >> 4); /* (mostly a pid the capture lacks) */
    if (sel & 4) {
        w.from_ns = 1000000ull * (sel >> 3 & 7);
        w.to_ns = w.from_ns + 500000000ull;
    }
    FILE *cap = fmemopen((void *)(in + 1), len - 1, "r");
    pyu_profile *p = pyu_profile_new();
    char msg[512];
    char *buf = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&buf, &n);
    if (cap && p && out &&
        pyu_capture_read(cap, (sel & 7) ? &w : NULL, p, msg, sizeof msg) ==
            0) {
        write_all(p, out);
        pyu_profile *q = pyu_profile_by_line(p);
        if (q) {
            write_all(q, out);
            pyu_profile_write_flamegraph_diff(q, q, out);
        }
        pyu_profile_free(q);
        /* the same filter again, on the profile read (its timeline, by
         * line when the selector's top bit says so) */
        w.by_line = (sel & 128) != 0;
        if (pyu_profile_select(p, &w, &q) == 0) {
            write_all(q, out);
            pyu_profile_free(q);
        }
    }
    if (cap)
        fclose(cap);
    if (out)
        fclose(out);
    free(buf);
    pyu_profile_free(p);
    return 0;
}
