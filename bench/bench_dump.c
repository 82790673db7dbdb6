/* bench_dump: time full stack reads of a running CPython process.
 *
 *   bench_dump PID ITERATIONS [--no-cpu-state] [--walk-only]
 *
 * Opens PID with PYU_OPEN_NONBLOCKING (the target keeps running, as it does
 * under CPython's own RemoteUnwinder), takes one warm-up dump, then times
 * ITERATIONS successful pyu_dump_take + pyu_dump_free pairs with
 * CLOCK_MONOTONIC and prints one line:
 *
 *   pyunwind_us_per_read F frames N threads T errors E partial P
 *
 * F is the wall time of the whole timed loop (retried attempts included)
 * divided by ITERATIONS; N is the total number of frames of the last dump,
 * T its number of threads.  While the target runs, its memory can change
 * under the reader: a pyu_dump_take that fails is counted in E, a dump in
 * which some thread's walk stopped early (pyu_thread.error) in P, and both
 * are retried, so that every timed read is a complete one (CPython's
 * RemoteUnwinder raises in both cases).  Only a vanished process, an
 * out-of-memory, a refused access or too many failures in a row is fatal.
 *
 * --no-cpu-state adds PYU_OPEN_NO_CPU_STATE (skips the per-thread
 * /proc/PID/task/TID/stat read used for the on-CPU status bit).
 *
 * --walk-only times pyu_walk with callbacks that only count frames and
 * note each frame's code object and instruction: no dump is built and no
 * name is resolved (the floor a sampler starts from).  A walk in which
 * some thread's frames stopped early counts as partial and is retried,
 * as for dumps.
 *
 * This is a benchmark: it reports numbers and asserts nothing about them.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pyunwind/pyunwind.h>

#define MAX_FAILURES_IN_A_ROW 1000

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static size_t total_frames(const pyu_dump *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->nthreads; i++)
        n += d->threads[i].nframes;
    return n;
}

static int fatal(int rc)
{
    return rc == -PYU_E_NOPROC || rc == -PYU_E_NOMEM ||
           rc == -PYU_E_PERM || rc == -PYU_E_INVAL;
}

/* --walk-only: what the callbacks see. */
typedef struct walk_count {
    size_t frames, threads;
    uint64_t sum; /* of code addresses and instructions: used, so kept */
    bool partial;
} walk_count;

static int count_thread(void *arg, const pyu_walk_thread *t)
{
    (void)t;
    ((walk_count *)arg)->threads++;
    return PYU_WALK_NEXT;
}

static int count_frame(void *arg, const pyu_walk_frame *f)
{
    walk_count *c = arg;
    c->frames++;
    c->sum += f->code_addr + f->instr;
    return PYU_WALK_NEXT;
}

static int count_end(void *arg, const pyu_walk_thread *t,
                     const pyu_walk_end *e)
{
    (void)t;
    if (e->error)
        ((walk_count *)arg)->partial = true;
    return PYU_WALK_NEXT;
}

/* One complete walk (retried as `take` retries dumps). */
static int walk(pyu_session *s, walk_count *c, unsigned long *errors,
                unsigned long *partials)
{
    static const pyu_walker w = {.thread = count_thread,
                                 .frame = count_frame,
                                 .thread_end = count_end};
    for (int tries = 1;; tries++) {
        memset(c, 0, sizeof *c);
        int rc = pyu_walk(s, &w, c);
        if (rc < 0) {
            (*errors)++;
            if (fatal(rc) || tries >= MAX_FAILURES_IN_A_ROW)
                return rc;
            continue;
        }
        if (!c->partial || tries >= MAX_FAILURES_IN_A_ROW)
            return 0;
        (*partials)++;
    }
}

static bool partial(const pyu_dump *d)
{
    for (size_t i = 0; i < d->nthreads; i++)
        if (d->threads[i].error)
            return true;
    return false;
}

/* One complete dump.  A failed pyu_dump_take is counted in *errors, a dump
 * in which some thread's walk stopped early (its stack changed under the
 * reader) in *partials; both are retried.  After MAX_FAILURES_IN_A_ROW
 * partial dumps in a row the last one is accepted (a thread may be
 * unreadable for good).  Returns 0, or the negated error when giving up. */
static int take(pyu_session *s, pyu_dump **d, unsigned long *errors,
                unsigned long *partials)
{
    for (int tries = 1;; tries++) {
        int rc = pyu_dump_take(s, 0, d);
        if (rc < 0) {
            (*errors)++;
            if (fatal(rc) || tries >= MAX_FAILURES_IN_A_ROW)
                return rc;
            continue;
        }
        if (!partial(*d) || tries >= MAX_FAILURES_IN_A_ROW)
            return 0;
        (*partials)++;
        pyu_dump_free(*d);
        *d = NULL;
    }
}

int main(int argc, char **argv)
{
    long pid, iters;
    unsigned flags = PYU_OPEN_NONBLOCKING;
    bool walk_only = false;
    if (argc < 3)
        goto usage;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--no-cpu-state") == 0)
            flags |= PYU_OPEN_NO_CPU_STATE;
        else if (strcmp(argv[i], "--walk-only") == 0)
            walk_only = true;
        else
            goto usage;
    }
    if (parse_long(argv[1], 1, INT_MAX, &pid) < 0 ||
        parse_long(argv[2], 1, LONG_MAX, &iters) < 0)
        goto usage;

    pyu_session *s = pyu_session_new();
    if (!s) {
        fprintf(stderr, "bench_dump: out of memory\n");
        return 1;
    }
    if (pyu_open_pid(s, (int)pid, flags) < 0) {
        fprintf(stderr, "bench_dump: %s\n", pyu_errmsg(s));
        pyu_session_free(s);
        return 1;
    }

    unsigned long errors = 0, partials = 0, ignored = 0;
    pyu_dump *d = NULL;
    if (walk_only) {
        walk_count c;
        if (walk(s, &c, &ignored, &ignored) < 0) {
            fprintf(stderr, "bench_dump: warm-up walk: %s\n", pyu_errmsg(s));
            pyu_session_free(s);
            return 1;
        }
        double t0 = now_us();
        for (long i = 0; i < iters; i++)
            if (walk(s, &c, &errors, &partials) < 0) {
                fprintf(stderr, "bench_dump: walk %ld: %s\n", i,
                        pyu_errmsg(s));
                pyu_session_free(s);
                return 1;
            }
        double elapsed = now_us() - t0;
        printf("pyunwind_us_per_read %.3f frames %zu threads %zu errors %lu "
               "partial %lu\n",
               elapsed / (double)iters, c.frames, c.threads, errors, partials);
        pyu_session_free(s);
        return 0;
    }
    if (take(s, &d, &ignored, &ignored) < 0) {
        fprintf(stderr, "bench_dump: warm-up dump: %s\n", pyu_errmsg(s));
        pyu_session_free(s);
        return 1;
    }
    pyu_dump_free(d);

    size_t frames = 0, threads = 0;
    double t0 = now_us();
    for (long i = 0; i < iters; i++) {
        if (take(s, &d, &errors, &partials) < 0) {
            fprintf(stderr, "bench_dump: dump %ld: %s\n", i, pyu_errmsg(s));
            pyu_session_free(s);
            return 1;
        }
        if (i == iters - 1) {
            frames = total_frames(d);
            threads = d->nthreads;
        }
        pyu_dump_free(d);
    }
    double elapsed = now_us() - t0;

    printf("pyunwind_us_per_read %.3f frames %zu threads %zu errors %lu "
           "partial %lu\n",
           elapsed / (double)iters, frames, threads, errors, partials);
    pyu_session_free(s);
    return 0;

usage:
    fprintf(stderr, "usage: bench_dump PID ITERATIONS [--no-cpu-state] "
                    "[--walk-only]\n");
    return 2;
}
