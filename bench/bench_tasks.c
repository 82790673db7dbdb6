/* bench_tasks: time full reads of the asyncio tasks of a CPython process.
 *
 *   bench_tasks PID ITERATIONS
 *
 * Opens PID with PYU_OPEN_NONBLOCKING (as CPython's RemoteUnwinder reads
 * it: running), takes one warm-up task list, then times ITERATIONS
 * pyu_tasks_take + pyu_tasks_free pairs and prints one line:
 *
 *   pyunwind_ms_per_read F tasks N
 *
 * A benchmark: it reports numbers and asserts nothing about them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <pyunwind/pyunwind.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) <= 0 || atol(argv[2]) <= 0) {
        fprintf(stderr, "usage: bench_tasks PID ITERATIONS\n");
        return 2;
    }
    long iters = atol(argv[2]);
    pyu_session *s = pyu_session_new();
    pyu_tasks *t = NULL;
    if (!s || pyu_open_pid(s, atoi(argv[1]), PYU_OPEN_NONBLOCKING) < 0 ||
        pyu_tasks_take(s, &t) < 0) {
        fprintf(stderr, "bench_tasks: %s\n", s ? pyu_errmsg(s) : "no memory");
        pyu_session_free(s);
        return 1;
    }
    pyu_tasks_free(t);
    size_t n = 0;
    double t0 = now_ms();
    for (long i = 0; i < iters; i++) {
        if (pyu_tasks_take(s, &t) < 0) {
            fprintf(stderr, "bench_tasks: read %ld: %s\n", i, pyu_errmsg(s));
            pyu_session_free(s);
            return 1;
        }
        n = t->ntasks;
        pyu_tasks_free(t);
    }
    printf("pyunwind_ms_per_read %.3f tasks %zu\n",
           (now_ms() - t0) / (double)iters, n);
    pyu_session_free(s);
    return 0;
}
