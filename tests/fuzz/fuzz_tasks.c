/* Fuzz harness: the asyncio walker (task lists, coroutine chains, await
 * graphs) over a mutated snapshot of a process running asyncio tasks
 * (snap.h), and the task list written as a table, a tree and JSON. */
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
        pyu_tasks *t = NULL;
        pyu_tasks_take(s, &t);
        if (t) {
            char *buf = NULL;
            size_t n = 0;
            int cycle = 0;
            FILE *f = open_memstream(&buf, &n);
            pyu_tasks_write_table(t, f);
            pyu_tasks_write_tree(t, f, &cycle);
            pyu_tasks_write_json(t, f);
            fclose(f);
            free(buf);
        }
        pyu_tasks_free(t);
    }
    pyu_session_free(s);
    snap_free(&S);
    return 0;
}
