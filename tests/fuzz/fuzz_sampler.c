/* Fuzz harness: the sampler and its frame cache fed changing images: a
 * mutated snapshot (snap.h) sampled, then changed by each change the
 * input carries after its memory (up to 32) and sampled again, so that
 * cached stacks meet memory that moved under them; then the profile
 * written in the formats that need no files (collapsed, top, json,
 * pprof, speedscope, gecko, raw, flame graph). */
#include <stdio.h>
#include <stdlib.h>

#include "snap.h"

static snap S;

static void write_all(pyu_profile *p)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    pyu_profile_write_collapsed(p, f);
    pyu_profile_write_top(p, f, PYU_TOP_SORT_SELF, 0);
    pyu_profile_write_json(p, f);
    pyu_profile_write_pprof(p, f);
    pyu_profile_write_speedscope(p, f);
    pyu_profile_write_gecko(p, f);
    pyu_profile_write_raw(p, f);
    pyu_profile_write_flamegraph(p, f);
    fclose(f);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    if (snap_parse(&S, in, len) < 0)
        return 0;
    pyu_session *s = pyu_session_new();
    pyu_profile *p = pyu_profile_new();
    pyu_sampler *sm = NULL;
    /* (the mode and flags from the header's pid: each gets its turn) */
    static const unsigned flag_sets[] = {
        0, PYU_SAMPLE_GC | PYU_SAMPLE_NATIVE | PYU_SAMPLE_OPCODES,
        PYU_SAMPLE_ASYNC | PYU_SAMPLE_OPCODES, PYU_SAMPLE_READ_ONLY,
        PYU_SAMPLE_NO_CACHE};
    pyu_sampler_opts o = {(int)((unsigned)S.pid / 5 % 4),
                          flag_sets[(unsigned)S.pid % 5], 0};
    if (s && p && pyu_open_memory(s, &snap_ops, &S, S.pid, S.runtime) == 0 &&
        pyu_sampler_new(s, &o, p, &sm) == 0) {
        pyu_sampler_take(sm);
        for (int i = 0; i < 32 && snap_change(&S); i++) {
            pyu_sampler_take(sm);
            pyu_sampler_take(sm);
        }
        write_all(p);
    }
    pyu_sampler_free(sm);
    pyu_profile_free(p);
    pyu_session_free(s);
    snap_free(&S);
    return 0;
}
