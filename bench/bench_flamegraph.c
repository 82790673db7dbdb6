/* bench_flamegraph: a flame graph page of a large synthetic profile, for
 * bench/flamegraph-run to time in a browser.
 *
 *   bench_flamegraph STACKS > page.html
 *
 * One thread, 400 functions, STACKS distinct stacks 10-39 frames deep
 * (callers drawn from a few functions near the root, many deeper down, so
 * that the tree branches at every level), each counted 1-5 times; written
 * with pyu_profile_write_flamegraph.  Prints the profile's size on stderr.
 */
#include "pyunwind/pyunwind.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long want = argc > 1 ? atol(argv[1]) : 100000;
    pyu_profile *p = pyu_profile_new();
    if (!p || want <= 0)
        return 1;
    long th = pyu_profile_add_thread(p, 1, 100, 0, 1);
    long frame[400];
    char name[64];
    for (int i = 0; i < 400; i++) {
        snprintf(name, sizeof name, "func_%d", i);
        long f = pyu_profile_add_func(p, name, "/srv/app/mod.py", i * 10, 0);
        frame[i] = f < 0 ? f : pyu_profile_add_frame(p, (uint32_t)f, i * 10);
        if (frame[i] < 0)
            return 1;
    }
    srand(1);
    while ((long)pyu_profile_get(p)->nstacks < want) {
        long node = 0;
        int depth = 10 + rand() % 30;
        for (int d = 0; d < depth && node >= 0; d++)
            node = pyu_profile_push(
                p, (uint32_t)node,
                (uint32_t)frame[(d * 7 + rand() % (d < 3 ? 3 : 20)) % 400]);
        if (node < 0 || pyu_profile_count(p, (uint32_t)th, (uint32_t)node,
                                          1 + (uint64_t)(rand() % 5), 0) < 0)
            return 1;
    }
    pyu_profile_info *pi = pyu_profile_info_of(p);
    pi->samples = pyu_profile_get(p)->total;
    pi->interval_ns = 1000000;
    pi->duration_ns = pi->samples * pi->interval_ns;
    if (pyu_profile_write_flamegraph(p, stdout) < 0)
        return 1;
    fprintf(stderr, "bench_flamegraph: %zu stacks, %zu nodes\n",
            pyu_profile_get(p)->nstacks, pyu_profile_get(p)->nnodes);
    pyu_profile_free(p);
    return 0;
}
