/* Fuzz harness: the walk (interpreters, threads, frames, code objects,
 * line tables, async stacks, the frames' variables and the objects they
 * hold) over a mutated snapshot of a real process's memory (snap.h), the
 * dump written as text and JSON, and py-print's lookups in its frames. */
#include <stdio.h>
#include <stdlib.h>

#include "snap.h"

static snap S;

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    if (snap_parse(&S, in, len) < 0)
        return 0;
    pyu_session *s = pyu_session_new();
    if (s && pyu_open_memory(s, &snap_ops, &S, S.pid, S.runtime) == 0) {
        static const unsigned walks[] = {0, PYU_WALK_ASYNC, PYU_WALK_LOCALS};
        for (size_t w = 0; w < sizeof walks / sizeof *walks; w++) {
            pyu_dump *d = NULL;
            pyu_dump_take(s, walks[w], &d);
            if (d) {
                char *buf = NULL;
                size_t n = 0;
                FILE *f = open_memstream(&buf, &n);
                pyu_dump_write_text(d, f, PYU_TEXT_NO_SOURCE);
                pyu_dump_write_json(d, f);
                fclose(f);
                free(buf);
                if (walks[w] == PYU_WALK_LOCALS)
                    snap_lookups(s, d);
            }
            pyu_dump_free(d);
        }
    }
    pyu_session_free(s);
    snap_free(&S);
    return 0;
}
