/* A sampling run, shared by `pyunwind sample` and the debuggers'
 * py-sample: the schedule, the status line, the summary and the profile's
 * output (see command.h). */
#include "command.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>

#define STATUS_EVERY_NS 250000000ull /* status line refresh */
#define GIVE_UP_NS 5000000000ull     /* failing this long in a row: stop */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A tick's point in its interval is random: a program that runs a loop
 * whose period divides the interval (or nearly) would otherwise be read
 * at the same point of its loop, or at points that drift slowly through
 * it, tick after tick -- the profile then gives each part of the loop the
 * share of the points it was read at, not of its time.  (workloads.py
 * stdlib, a 0.6 ms loop of four phases, sampled at 241, 250 and 263 a
 * second: each phase's share of the samples was 0.07, 0.03 and 0.02 from
 * its share of the target's own clock with --blocking, and as far running;
 * see bench/README.md.)  xorshift64: not for secrets. */
static uint64_t pick(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void sleep_until(uint64_t at)
{
    struct timespec t = {(time_t)(at / 1000000000u),
                         (long)(at % 1000000000u)};
    /* EINTR (Ctrl-C) returns early: the loop looks at the stop flag */
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
}

/* The wait for a tick.  A sleep wakes late (timer slack, the scheduler):
 * tens of microseconds, more than a sample takes, so a schedule of sleeps
 * does not serve a high rate.  The wait sleeps until a little before the
 * tick (by the latest lateness seen, which it keeps learning) and spends
 * the rest reading the clock. */
typedef struct waiter {
    uint64_t late;   /* how late a sleep woke, recently at most */
    unsigned long slack; /* the thread's timer slack before the run */
    bool slack_set;
} waiter;

#define LATE_MIN 2000ull    /* ns of the wait always spent on the clock */
#define LATE_MAX 2000000ull /* ... at most */

static void wait_start(waiter *w)
{
    int old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    w->late = 60000; /* (the kernel's default slack is 50 us) */
    w->slack_set = old >= 0 && prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0) == 0;
    w->slack = old >= 0 ? (unsigned long)old : 0;
}

static void wait_end(waiter *w)
{
    if (w->slack_set)
        prctl(PR_SET_TIMERSLACK, w->slack, 0, 0, 0);
}

static void wait_until(waiter *w, uint64_t at, volatile sig_atomic_t *stop)
{
    uint64_t now = now_ns();
    if (at > now + w->late + LATE_MIN) {
        uint64_t want = at - w->late - LATE_MIN;
        sleep_until(want);
        uint64_t woke = now_ns();
        /* learn: the largest lateness of late, decaying slowly */
        uint64_t late = woke > want ? woke - want : 0;
        w->late = late > w->late ? late : w->late - (w->late - late) / 64;
        if (w->late > LATE_MAX)
            w->late = LATE_MAX;
    }
    while (now_ns() < at && !(stop && *stop))
        ;
}

static void status_line(FILE *f, const pyu_cmd_opts *o, uint64_t elapsed,
                        const pyu_profile_info *in)
{
    double secs = (double)elapsed / 1e9;
    fprintf(f, "\rpyunwind: sampling %.1f", secs);
    if (o->duration > 0)
        fprintf(f, "/%.1f", o->duration);
    fprintf(f, " s, %" PRIu64 " samples (%.0f/s), %" PRIu64 " failed, %" PRIu64
               " missed\033[K",
            in->samples, secs > 0 ? (double)in->samples / secs : 0.0,
            in->failed, in->missed);
    fflush(f);
}

void pyu_cmd_sample_summary(FILE *diag, const pyu_profile_info *in,
                            const char *ended)
{
    double secs = (double)in->duration_ns / 1e9;
    uint64_t expected = in->samples + in->missed;
    fprintf(diag,
            "pyunwind: %" PRIu64 " samples in %.2f s (%.1f/s), %" PRIu64
            " failed (%.2f%%), %" PRIu64 " missed of %" PRIu64
            " ticks (%.2f%%)%s%s\n",
            in->samples, secs, secs > 0 ? (double)in->samples / secs : 0.0,
            in->failed,
            in->samples ? 100.0 * (double)in->failed / (double)in->samples
                        : 0.0,
            in->missed, expected,
            expected ? 100.0 * (double)in->missed / (double)expected : 0.0,
            ended ? "; " : "", ended ? ended : "");
    /* more than 1% missed: the asked rate is more than the target allows
     * (samples back to back would take this many a second) */
    if (in->interval_ns && in->missed * 100 > expected && in->busy_ns &&
        in->samples)
        fprintf(diag,
                "pyunwind: the asked rate (%.0f/s) is more than this target "
                "allows: a sample took %.1f us on average (at most about "
                "%.0f/s, -r max)\n",
                1e9 / (double)in->interval_ns,
                (double)in->busy_ns / 1e3 / (double)in->samples,
                (double)in->samples * 1e9 / (double)in->busy_ns);
}

static void stats_line(FILE *diag, const pyu_sampler_stats *st)
{
    fprintf(diag,
            "pyunwind: %" PRIu64 " stacks, %" PRIu64 " reads (%.2f a sample, "
            "%" PRIu64 " snapshots of one thread); frames: %" PRIu64
            " read, %" PRIu64 " from the cache; stacks: %" PRIu64
            " from the cache but the innermost frame, %" PRIu64
            " from the cache but the frames above the anchor, %" PRIu64
            " read whole, %" PRIu64 " of them from the current frame read "
            "after the frames; %" PRIu64 " read again (torn), %" PRIu64
            " with <unknown>, %" PRIu64 " grafted, %" PRIu64
            " walks through generators that had yielded, %" PRIu64
            " from the frame that entered the eval loop, %" PRIu64
            " from the top of the data stack, %" PRIu64
            " with the current frame popped before its copy (%" PRIu64
            " of them the caller's), %" PRIu64 " with its slot reused by "
            "another call; anchors %s, %" PRIu64 " written\n",
            st->stacks, st->reads,
            st->samples ? (double)st->reads / (double)st->samples : 0.0,
            st->snapshots, st->frames_read, st->frames_cached,
            st->cache_full, st->cache_part, st->cache_miss, st->later, st->torn,
            st->unknown, st->grafted, st->resumed, st->entered, st->topped,
            st->popped,
            st->popped_left, st->reused,
            st->anchors ? "on" : "off", st->anchor_writes);
}

/* The file a live target runs (/proc/PID/exe), to notice an exec. */
static bool exe_of(int pid, struct stat *st)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    return pid > 0 && stat(path, st) == 0;
}

/* Errors after which sampling cannot go on. */
static bool fatal(int rc)
{
    return rc == -PYU_E_NOMEM || rc == -PYU_E_VERSION || rc == -PYU_E_INVAL ||
           rc == -PYU_E_PERM;
}

int pyu_cmd_sample_run(pyu_session *s, const pyu_cmd_opts *o,
                       const pyu_cmd_sample_hooks *h, pyu_profile *p,
                       FILE *diag, char *msg, size_t msglen)
{
    pyu_sampler_opts so = {o->mode, o->sample_flags, o->thread};
    pyu_sampler *sm;
    int rc = pyu_sampler_new(s, &so, p, &sm);
    if (rc < 0) {
        snprintf(msg, msglen, "%s", pyu_errmsg(s));
        return pyu_cmd_exit_for(rc);
    }
    pyu_profile_info *in = pyu_profile_info_of(p);
    uint64_t interval = o->rate > 0 ? (uint64_t)(1e9 / o->rate) : 0;
    in->interval_ns = interval;
    pyu_capture *cap = NULL;
    if (h->raw && (rc = pyu_capture_new(p, h->raw, &cap)) < 0) {
        snprintf(msg, msglen, "writing the capture failed: %s",
                 rc == -PYU_E_NOMEM ? "out of memory" : strerror(errno));
        pyu_capture_end(cap);
        pyu_sampler_free(sm);
        return PYU_EXIT_INTERNAL;
    }
    uint64_t failed_before = 0, missed_before = 0;
    uint64_t start = now_ns(), tick = 0, last_status = start;
    uint64_t deadline = o->duration > 0
                            ? start + (uint64_t)(o->duration * 1e9)
                            : UINT64_MAX;
    uint64_t failing_since = 0;
    waiter wt;
    wait_start(&wt);
    uint64_t seed = start | 1;
    const char *ended = NULL;
    int ex = PYU_EXIT_OK;
    pyu_process ti = {0};
    struct stat exe0, exe1;
    bool have_exe = pyu_target(s, &ti) == 0 && exe_of(ti.pid, &exe0);
    for (;;) {
        if (h->stop && *h->stop) {
            ended = "interrupted";
            break;
        }
        uint64_t t = now_ns();
        if (t >= deadline)
            break;
        rc = pyu_sampler_take(sm);
        in->busy_ns += now_ns() - t;
        if (cap && pyu_capture_sample(cap, t - start,
                                      in->failed != failed_before,
                                      in->missed - missed_before) < 0) {
            snprintf(msg, msglen, "writing the capture failed: %s",
                     strerror(errno));
            ex = PYU_EXIT_INTERNAL;
            break;
        }
        failed_before = in->failed;
        missed_before = in->missed;
        if (rc == -PYU_E_NOPROC || (h->gone && h->gone(h->arg))) {
            ended = "the target exited";
            break;
        }
        if (rc < 0 && have_exe) {
            /* (a process that exits loses its /proc/PID/exe first: a
             * zombie has none) */
            if (!exe_of(ti.pid, &exe1)) {
                ended = "the target exited";
                break;
            }
            if (exe1.st_ino != exe0.st_ino || exe1.st_dev != exe0.st_dev) {
                ended = "the target ran exec (another program)";
                break;
            }
        }
        if (rc < 0 && (fatal(rc) || (failing_since &&
                                     t - failing_since > GIVE_UP_NS))) {
            snprintf(msg, msglen, "sampling stopped: %s", pyu_errmsg(s));
            ex = pyu_cmd_exit_for(rc);
            break;
        }
        failing_since = rc < 0 ? (failing_since ? failing_since : t) : 0;
        if ((h->status || h->tick) && t - last_status >= STATUS_EVERY_NS) {
            if (h->tick) {
                in->duration_ns = t - start;
                h->tick(h->tick_arg, p, t - start);
            } else {
                status_line(h->status, o, t - start, in);
            }
            last_status = t;
        }
        if (!interval)
            continue;
        /* an absolute schedule: tick k is due in the interval from start
         * + k * interval, at a random point of it; ticks whose interval
         * is past when the sample ends are missed */
        tick++;
        uint64_t now = now_ns(), due = start + tick * interval;
        if (now >= due + interval) {
            uint64_t behind = (now - due) / interval;
            in->missed += behind;
            tick += behind;
            due = start + tick * interval;
        }
        due += pick(&seed) % interval;
        if (due > deadline)
            due = deadline;
        if (due > now)
            wait_until(&wt, due, h->stop);
    }
    wait_end(&wt);
    in->duration_ns = now_ns() - start;
    if (cap && pyu_capture_end(cap) < 0 && ex == PYU_EXIT_OK) {
        snprintf(msg, msglen, "writing the capture failed: %s",
                 strerror(errno));
        ex = PYU_EXIT_INTERNAL;
    }
    if (h->status) {
        fputs("\r\033[K", h->status);
        fflush(h->status);
    }
    if (diag) {
        pyu_cmd_sample_summary(diag, in, ended);
        if (o->verbose) {
            pyu_sampler_stats st;
            pyu_sampler_stats_get(sm, &st);
            stats_line(diag, &st);
        }
    }
    pyu_sampler_free(sm);
    return ex;
}
