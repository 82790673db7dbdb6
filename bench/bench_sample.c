/* bench_sample: the cost of one sample of a running CPython process.
 *
 *   bench_sample PID ITERATIONS [--no-cache|--read-only]
 *
 * Opens PID with PYU_OPEN_NONBLOCKING, makes a wall-mode sampler (every
 * thread; with the frame cache and its anchor unless told otherwise),
 * takes 100 warm-up samples, then times ITERATIONS pyu_sampler_take calls
 * back to back with CLOCK_MONOTONIC and prints one line:
 *
 *   pyunwind_us_per_sample F stacks S reads R failed X unproven U
 *
 * F is the wall time of the timed loop divided by ITERATIONS (failed
 * samples included: the sampler does not retry a sample, it reads each
 * torn thread once more and then leaves it out); S the stacks recorded per
 * sample, R the read calls to the target per sample, X the failed samples
 * and U the stacks recorded without the anchor's proof.
 *
 * A benchmark: it reports numbers and asserts nothing about them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pyunwind/pyunwind.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_sample PID ITERATIONS "
                        "[--no-cache|--read-only]\n");
        return 2;
    }
    int pid = atoi(argv[1]);
    long n = atol(argv[2]);
    unsigned flags = 0;
    for (int i = 3; i < argc; i++)
        flags |= strcmp(argv[i], "--no-cache") == 0 ? PYU_SAMPLE_NO_CACHE
                 : strcmp(argv[i], "--read-only") == 0
                     ? PYU_SAMPLE_READ_ONLY
                     : 0;
    pyu_session *s = pyu_session_new();
    if (pid <= 0 || n <= 0 || pyu_open_pid(s, pid, PYU_OPEN_NONBLOCKING) < 0) {
        fprintf(stderr, "bench_sample: %s\n",
                pid > 0 && n > 0 ? pyu_errmsg(s) : "bad arguments");
        return 1;
    }
    pyu_profile *p = pyu_profile_new();
    pyu_sampler *sm;
    pyu_sampler_opts o = {PYU_MODE_WALL, flags, 0};
    if (pyu_sampler_new(s, &o, p, &sm) < 0) {
        fprintf(stderr, "bench_sample: %s\n", pyu_errmsg(s));
        return 1;
    }
    for (int i = 0; i < 100; i++)
        pyu_sampler_take(sm);
    pyu_sampler_stats before, after;
    pyu_sampler_stats_get(sm, &before);
    double t0 = now_us();
    for (long i = 0; i < n; i++)
        if (pyu_sampler_take(sm) == -PYU_E_NOPROC) {
            fprintf(stderr, "bench_sample: the process has exited\n");
            return 1;
        }
    double t1 = now_us();
    pyu_sampler_stats_get(sm, &after);
    double k = (double)n;
    printf("pyunwind_us_per_sample %.3f stacks %.2f reads %.2f failed %llu "
           "unproven %llu\n",
           (t1 - t0) / k, (double)(after.stacks - before.stacks) / k,
           (double)(after.reads - before.reads) / k,
           (unsigned long long)(after.failed - before.failed),
           (unsigned long long)(after.unproven - before.unproven));
    pyu_sampler_free(sm);
    pyu_profile_free(p);
    pyu_session_free(s);
    return 0;
}
