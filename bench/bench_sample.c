/* bench_sample: the cost of one sample of a running CPython process.
 *
 *   bench_sample PID ITERATIONS [--no-cache|--read-only] [--floor]
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
 * --floor adds a second line, what the kernel alone costs:
 *
 *   floor_us_per_read F ranges K pages P
 *
 * A second session on PID with memory ops of this file (process_vm_readv
 * and _writev, recording the ranges of each read) runs the same sampler
 * for 100 samples; then the ranges of its last read, the steady state's
 * one read per sample, are read again ITERATIONS times with one
 * process_vm_readv each and nothing else: F µs per read, K ranges, P
 * pages they touch.  No sampler can read those places for less.  And a
 * third line, the least one process_vm_readv costs at all (8 bytes of the
 * first range, ITERATIONS times):
 *
 *   syscall_us_per_read F
 *
 * A benchmark: it reports numbers and asserts nothing about them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include <pyunwind/pyunwind.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* --floor: memory ops that remember the ranges of the last read */
#define REC_MAX 256
typedef struct rec {
    int pid;
    uint64_t addr[REC_MAX];
    size_t len[REC_MAX], n;
} rec;

static int rec_errno(void)
{
    return errno == ESRCH ? -PYU_E_NOPROC
           : errno == EPERM ? -PYU_E_PERM
           : errno == EFAULT ? -PYU_E_FAULT
                             : -PYU_E_IO;
}

static int rec_read(void *ctx, const pyu_range *r, size_t n)
{
    rec *c = ctx;
    if (n > REC_MAX)
        return -PYU_E_IO;
    struct iovec loc[REC_MAX], rem[REC_MAX];
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        loc[i] = (struct iovec){r[i].buf, r[i].len};
        rem[i] = (struct iovec){(void *)(uintptr_t)r[i].addr, r[i].len};
        c->addr[i] = r[i].addr;
        c->len[i] = r[i].len;
        total += r[i].len;
    }
    c->n = n;
    ssize_t got = process_vm_readv(c->pid, loc, n, rem, n, 0);
    if (got < 0)
        return rec_errno();
    return (size_t)got == total ? 0 : -PYU_E_FAULT;
}

static int rec_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
    rec *c = ctx;
    struct iovec loc = {(void *)buf, len};
    struct iovec rem = {(void *)(uintptr_t)addr, len};
    ssize_t got = process_vm_writev(c->pid, &loc, 1, &rem, 1, 0);
    if (got < 0)
        return rec_errno();
    return (size_t)got == len ? 0 : -PYU_E_FAULT;
}

static const pyu_memory_ops rec_ops = {.read = rec_read, .write = rec_write};

/* Prints the floor line (see the top); returns 0 or 1. */
static int floor_run(int pid, uint64_t runtime, unsigned flags, long n)
{
    rec *c = calloc(1, sizeof *c);
    pyu_session *s = pyu_session_new();
    if (!c || !s)
        return 1;
    c->pid = pid;
    pyu_profile *p = pyu_profile_new();
    pyu_sampler *sm = NULL;
    pyu_sampler_opts o = {PYU_MODE_WALL, flags, 0};
    /* (the session owns c: no destroy op, freed here) */
    if (pyu_open_memory(s, &rec_ops, c, pid, runtime) < 0 ||
        pyu_sampler_new(s, &o, p, &sm) < 0) {
        fprintf(stderr, "bench_sample: --floor: %s\n", pyu_errmsg(s));
        return 1;
    }
    for (int i = 0; i < 100; i++)
        pyu_sampler_take(sm);
    size_t k = c->n, total = 0, pages = 0;
    struct iovec loc[REC_MAX], rem[REC_MAX];
    for (size_t i = 0; i < k; i++)
        total += c->len[i];
    char *buf = malloc(total ? total : 1);
    if (!buf)
        return 1;
    for (size_t i = 0, at = 0; i < k; i++) {
        loc[i] = (struct iovec){buf + at, c->len[i]};
        rem[i] = (struct iovec){(void *)(uintptr_t)c->addr[i], c->len[i]};
        at += c->len[i];
        pages += (c->addr[i] + c->len[i] - 1) / 4096 - c->addr[i] / 4096 + 1;
    }
    double t0 = now_us();
    for (long i = 0; i < n; i++)
        if (process_vm_readv(pid, loc, k, rem, k, 0) < 0) {
            perror("bench_sample: --floor");
            return 1;
        }
    double t1 = now_us();
    printf("floor_us_per_read %.3f ranges %zu pages %zu\n",
           (t1 - t0) / (double)n, k, pages);
    /* the least any read can cost: 8 bytes of the first range */
    struct iovec l8 = {buf, 8}, r8 = {rem[0].iov_base, 8};
    t0 = now_us();
    for (long i = 0; i < n && k; i++)
        if (process_vm_readv(pid, &l8, 1, &r8, 1, 0) < 0) {
            perror("bench_sample: --floor");
            return 1;
        }
    printf("syscall_us_per_read %.3f\n", (now_us() - t0) / (double)n);
    free(buf);
    pyu_sampler_free(sm);
    pyu_profile_free(p);
    pyu_session_free(s);
    free(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_sample PID ITERATIONS "
                        "[--no-cache|--read-only] [--floor]\n");
        return 2;
    }
    int pid = atoi(argv[1]);
    long n = atol(argv[2]);
    unsigned flags = 0;
    bool floor = false;
    for (int i = 3; i < argc; i++)
        floor |= strcmp(argv[i], "--floor") == 0;
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
    pyu_python_info info;
    int rc = 0;
    if (floor && pyu_python(s, &info) == 0)
        rc = floor_run(pid, info.runtime_addr, flags, n);
    pyu_session_free(s);
    return rc;
}
