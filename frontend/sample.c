/* A sampling run, shared by `pyunwind sample` and the debuggers'
 * py-sample: the schedule, the status line, the summary and the profile's
 * output (see command.h). */
#include "command.h"
#include "follow.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
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
}

/* What the schedule saw of the ticks it missed: each time ticks were
 * missed, whether the tick before had taken long (its samples: the
 * target's reads, or the machine's CPUs taken from the sampler while it
 * read) or had begun late (the sampler's wake-up past its tick). */
typedef struct missed_why {
    uint64_t slow, late;               /* ticks missed so */
    uint64_t slow_max_ns, late_max_ns; /* the longest tick, latest wake */
} missed_why;

/* More than 1 % of the ticks missed: says why, with what was measured.
 * served: the ticks served (several processes: each tick samples every
 * process sampled then, and its time is theirs together). */
static void missed_line(FILE *diag, const pyu_profile_info *in,
                        uint64_t served, bool many, const missed_why *w)
{
    uint64_t expected = served + in->missed;
    if (!in->interval_ns || in->missed * 100 <= expected || !served)
        return;
    double avg = (double)in->busy_ns / 1e3 / (double)served;
    fprintf(diag, "pyunwind: why ticks were missed (%.0f/s asked, one tick "
                  "every %.1f us; a %s took %.1f us on average, at most "
                  "about %.0f/s back to back, -r max):",
            1e9 / (double)in->interval_ns, (double)in->interval_ns / 1e3,
            many ? "tick (every process once)" : "sample", avg,
            avg > 0 ? 1e6 / avg : 0.0);
    if (w->slow)
        fprintf(diag, " %" PRIu64 " after ticks that took long (up to %.1f "
                      "us: %s)%s",
                w->slow, (double)w->slow_max_ns / 1e3,
                avg * 1e3 > (double)in->interval_ns * 0.9
                    ? many ? "the rate asked is more than these targets allow"
                           : "the rate asked is more than this target allows"
                    : "slow reads, or the machine's CPUs busy",
                w->late ? "," : "");
    if (w->late)
        fprintf(diag, " %" PRIu64 " after the sampler woke late (up to %.1f "
                      "us: the machine's CPUs busy)",
                w->late, (double)w->late_max_ns / 1e3);
    fputc('\n', diag);
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
            " from the loop below one not yet entered, %" PRIu64
            " from the top of the data stack, %" PRIu64
            " with the current frame popped before its copy (%" PRIu64
            " of them the caller's), %" PRIu64 " with its slot reused by "
            "another call; anchors %s, %" PRIu64 " written\n",
            st->stacks, st->reads,
            st->samples ? (double)st->reads / (double)st->samples : 0.0,
            st->snapshots, st->frames_read, st->frames_cached,
            st->cache_full, st->cache_part, st->cache_miss, st->later, st->torn,
            st->unknown, st->grafted, st->resumed, st->entered, st->unlinked,
            st->topped,
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

/* The fields of /proc/PID/stat after its name (which may hold anything)
 * into buf; NULL when it cannot be read.  Anyone may read it, unlike the
 * process's exe. */
static const char *stat_of(int pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *end = strrchr(buf, ')');
    return end && end[1] == ' ' ? end + 2 : NULL;
}

/* Whether process pid exists and has not exited (a zombie has). */
static bool alive(int pid)
{
    char buf[1024];
    const char *f = stat_of(pid, buf, sizeof buf);
    return f && *f != 'Z' && *f != 'X';
}

/* What tells one program a process runs from the next it runs by exec:
 * where its stack starts (the 28th field of its stat; 0 when unknown).
 * The executable can be the same file, the runtime at the same address
 * (a Python that is not position-independent running itself again), but
 * the kernel lays out a new stack. */
static uint64_t exec_mark(int pid)
{
    char buf[1024];
    const char *f = stat_of(pid, buf, sizeof buf);
    for (int field = 3; f && field < 28; field++) /* (f: field 3) */
        f = (f = strchr(f, ' ')) ? f + 1 : NULL;
    return f ? strtoull(f, NULL, 10) : 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev;
}

/* Errors after which sampling cannot go on. */
static bool fatal(int rc)
{
    return rc == -PYU_E_NOMEM || rc == -PYU_E_VERSION || rc == -PYU_E_INVAL ||
           rc == -PYU_E_PERM;
}

void pyu_cmd_command_of(int pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    *buf = '\0';
    FILE *f = pid > 0 ? fopen(path, "re") : NULL;
    if (!f)
        return;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
}

/* ------------------------------------------------------------ targets */

#define SCAN_EVERY_NS 5000000ull /* --subprocesses: /proc listed this often
                                    (a new process is found within twice
                                    that) */
#define NOTPY_TRIES 8 /* a young process that is not Python yet (a Python
                         that has not mapped its library; a fork about to
                         exec one) is tried again at 5, 10, 20 ... ms */
#define SCAN_BATCH 256 /* new processes taken from one scan at most */
#define EXEC_CHECKS 16 /* targets looked at for an exec at each scan */

/* A process sampled in the run. */
typedef struct target {
    pyu_session *s; /* owned when own */
    pyu_sampler *sm;
    int pid;
    uint32_t proc;  /* its process in the profile */
    bool own;       /* its session was opened here */
    bool done;      /* let go */
    bool have_exe;
    struct stat exe;
    uint64_t mark;  /* exec_mark() when found (0: unknown) */
    uint64_t failing_since;
} target;

/* A descendant that was not Python when it was found. */
typedef struct notpy {
    int pid;
    struct stat exe;
    bool have_exe;
    unsigned tries;
    uint64_t next; /* when it is tried again while young */
} notpy;

typedef struct run {
    const pyu_cmd_opts *o;
    pyu_profile *p;
    pyu_capture *cap;
    FILE *diag;
    target *t;
    size_t n, cap_t, live;
    pyu_proc_watch *watch;
    size_t exec_at; /* the next target looked at for an exec */
    notpy *np;
    size_t nnp, capnp;
    uint64_t start;
    uint64_t missed_before; /* the schedule's missed ticks at the last
                               sample the capture recorded */
    bool many;   /* several processes: each one's end is not the run's */
    int ex;      /* the worst of what went wrong with a single process */
} run;

/* Adds session s (of live process pid, or 0) to the run: its sampler, its
 * process in the profile.  Returns 0, or a negated error (s is then not taken). */
static int add_target(run *r, pyu_session *s, int pid, bool own)
{
    if (r->n == r->cap_t) {
        size_t ncap = r->cap_t ? r->cap_t * 2 : 8;
        target *nt = realloc(r->t, ncap * sizeof *nt);
        if (!nt)
            return -PYU_E_NOMEM;
        r->t = nt;
        r->cap_t = ncap;
    }
    const pyu_cmd_opts *o = r->o;
    pyu_sampler_opts so = {o->mode, o->sample_flags, o->thread};
    pyu_sampler *sm;
    int rc = pyu_sampler_new(s, &so, r->p, &sm);
    if (rc < 0)
        return rc;
    pyu_process ti = {0};
    pyu_target(s, &ti);
    char cmd[1024];
    pyu_cmd_command_of(pid, cmd, sizeof cmd); /* (pid 0: not a live process) */
    /* (the sampler added its process: this names it) */
    long proc = pyu_profile_add_process(r->p, ti.pid, cmd, ti.python,
                                        ti.free_threaded, 0);
    if (proc < 0) {
        pyu_sampler_free(sm);
        return (int)proc;
    }
    target *t = &r->t[r->n++];
    *t = (target){.s = s, .sm = sm, .pid = pid ? pid : ti.pid,
                  .proc = (uint32_t)proc, .own = own};
    t->have_exe = exe_of(t->pid, &t->exe);
    t->mark = exec_mark(t->pid);
    r->live++;
    return 0;
}

/* How a target is opened: stopped for each read with --blocking (its
 * sampler then stops it), else running. */
static unsigned open_flags(const pyu_cmd_opts *o)
{
    return o->sample_flags & PYU_SAMPLE_BLOCKING ? 0 : PYU_OPEN_NONBLOCKING;
}

/* Lets target t go: it ended at elapsed (when it exited: `exited`). */
static void let_go(run *r, target *t, bool exited, uint64_t elapsed)
{
    if (t->done)
        return;
    t->done = true;
    r->live--;
    if (exited)
        pyu_profile_end_process(r->p, t->proc, elapsed);
    pyu_sampler_free(t->sm);
    t->sm = NULL;
    if (t->own) {
        pyu_session_free(t->s);
        t->s = NULL;
    }
}

static void note_notpy(run *r, int pid, uint64_t now)
{
    for (size_t i = 0; i < r->nnp; i++)
        if (r->np[i].pid == pid) {
            r->np[i].have_exe = exe_of(pid, &r->np[i].exe);
            return;
        }
    if (r->nnp == r->capnp) {
        size_t ncap = r->capnp ? r->capnp * 2 : 16;
        notpy *n = realloc(r->np, ncap * sizeof *n);
        if (!n)
            return; /* (not tried again) */
        r->np = n;
        r->capnp = ncap;
    }
    notpy *e = &r->np[r->nnp++];
    *e = (notpy){.pid = pid, .next = now + SCAN_EVERY_NS};
    e->have_exe = exe_of(pid, &e->exe);
}

/* Opens descendant pid and samples it from now on; one that is not Python
 * (yet) is remembered, one that cannot be read is left out with a line. */
static void open_descendant(run *r, int pid, uint64_t now)
{
    pyu_session *s = pyu_session_new();
    if (!s)
        return;
    int rc = pyu_open_pid(s, pid, open_flags(r->o));
    if (rc == 0 && (rc = add_target(r, s, pid, true)) == 0)
        return;
    if (rc == -PYU_E_NOTPY || rc == -PYU_E_VERSION || rc == -PYU_E_STATE)
        note_notpy(r, pid, now); /* (STATE: a runtime not set up yet) */
    else if (rc != -PYU_E_NOPROC && alive(pid) && r->diag) {
        /* (one that exited meanwhile is no target: its memory went while
         * it was read) */
        fprintf(r->diag, "pyunwind: warning: process %d left out: %s\n", pid,
                rc == -PYU_E_NOMEM ? "out of memory" : pyu_errmsg(s));
        r->ex = pyu_cmd_worse_exit(r->ex, PYU_EXIT_PARTIAL);
    }
    pyu_session_free(s);
}

/* A few of the targets each time: has one run exec since the last look?
 * (its reads may go on working: the same Python again, not
 * position-independent, has its runtime at the same address, and the
 * caches of the program before would name the new one's code.)  With
 * several processes it is let go, and with --subprocesses its pid looked
 * at again as new; returns true when the one target of a run did. */
static bool check_execs(run *r, uint64_t now)
{
    for (size_t k = 0; k < EXEC_CHECKS && r->n; k++) {
        target *t = &r->t[r->exec_at++ % r->n];
        uint64_t mark;
        if (t->done || !t->mark || (mark = exec_mark(t->pid)) == t->mark ||
            !mark)
            continue;
        if (!r->many)
            return true;
        int pid = t->pid;
        let_go(r, t, true, now - r->start);
        if (r->watch)
            open_descendant(r, pid, now); /* (may move r->t) */
    }
    return false;
}

/* --subprocesses: the processes new in the tree, and the ones that were
 * not Python and may be now (young, or since an exec). */
static void discover(run *r, uint64_t now)
{
    int pids[SCAN_BATCH];
    int n = pyu_proc_watch_scan(r->watch, pids, SCAN_BATCH);
    for (int i = 0; i < n; i++) {
        bool known = false;
        for (size_t k = 0; k < r->n && !known; k++)
            known = !r->t[k].done && r->t[k].pid == pids[i];
        if (!known)
            open_descendant(r, pids[i], now);
    }
    for (size_t i = 0; i < r->nnp;) {
        notpy *e = &r->np[i];
        struct stat st;
        bool live = alive(e->pid), have = live && exe_of(e->pid, &st);
        bool exec = have && e->have_exe && !same_file(&st, &e->exe);
        bool young = e->tries < NOTPY_TRIES && now >= e->next;
        if (!live) {
            r->np[i] = r->np[--r->nnp];
            continue;
        }
        if (exec || young) {
            int pid = e->pid;
            e->tries += young;
            e->next = now + (SCAN_EVERY_NS << e->tries);
            size_t before = r->n;
            open_descendant(r, pid, now); /* (may move r->np) */
            if (r->n != before) {
                for (size_t k = 0; k < r->nnp; k++)
                    if (r->np[k].pid == pid) {
                        r->np[k] = r->np[--r->nnp];
                        break;
                    }
                continue;
            }
        }
        i++;
    }
}

/* One sample of target t at t_ns.  Returns PYU_EXIT_OK, or for a run of
 * one process the code that ends it (msg, *ended). */
static int sample_one(run *r, target *t, uint64_t t_ns,
                      const pyu_cmd_sample_hooks *h, const char **ended,
                      char *msg, size_t msglen)
{
    pyu_profile_info *in = pyu_profile_info_of(r->p);
    uint64_t failed_before = in->failed;
    int rc = pyu_sampler_take(t->sm);
    if (r->cap && pyu_capture_sample(r->cap, t_ns - r->start,
                                     in->failed != failed_before,
                                     in->missed - r->missed_before) < 0) {
        snprintf(msg, msglen, "writing the capture failed: %s",
                 strerror(errno));
        return PYU_EXIT_INTERNAL;
    }
    r->missed_before = in->missed;
    const char *why = NULL;
    bool exec = false;
    struct stat exe1;
    if (rc == -PYU_E_NOPROC || (!r->many && h->gone && h->gone(h->arg)))
        why = "the target exited";
    else if (rc < 0 && t->have_exe && t->pid > 0) {
        /* (a process that exits loses its /proc/PID/exe first: a zombie
         * has none) */
        uint64_t mark;
        if (!exe_of(t->pid, &exe1))
            why = "the target exited";
        else if ((exec = !same_file(&exe1, &t->exe) ||
                         (t->mark && (mark = exec_mark(t->pid)) &&
                          mark != t->mark)))
            why = "the target ran exec (another program)";
    }
    if (why) {
        if (rc < 0 && rc != -PYU_E_NOPROC) {
            /* (a sample of a process that had exited, or run another
             * program, is no sample of it) */
            in->samples--;
            in->failed -= in->failed != failed_before;
        }
        if (!r->many) {
            *ended = why;
            return -1;
        }
        int pid = t->pid;
        let_go(r, t, true, t_ns - r->start);
        if (exec && r->watch) /* (the program it runs now may be Python) */
            open_descendant(r, pid, t_ns); /* (may move r->t) */
        return PYU_EXIT_OK;
    }
    if (rc < 0 && (fatal(rc) || (t->failing_since &&
                                 t_ns - t->failing_since > GIVE_UP_NS))) {
        int ex = pyu_cmd_exit_for(rc);
        if (!r->many) {
            snprintf(msg, msglen, "sampling stopped: %s", pyu_errmsg(t->s));
            return ex;
        }
        if (r->diag)
            fprintf(r->diag, "pyunwind: warning: process %d: sampling "
                             "stopped: %s\n", t->pid, pyu_errmsg(t->s));
        r->ex = pyu_cmd_worse_exit(r->ex, PYU_EXIT_PARTIAL);
        let_go(r, t, false, t_ns - r->start);
        return PYU_EXIT_OK;
    }
    t->failing_since = rc < 0 ? (t->failing_since ? t->failing_since : t_ns)
                              : 0;
    return PYU_EXIT_OK;
}

/* The end-of-run line of several processes: each tick samples every
 * process sampled then. */
static void many_summary(FILE *diag, const pyu_profile_data *d,
                         uint64_t ticks, const char *ended)
{
    const pyu_profile_info *in = d->info;
    double secs = (double)in->duration_ns / 1e9;
    uint64_t expected = ticks + in->missed;
    fprintf(diag,
            "pyunwind: %zu process%s, %" PRIu64 " samples in %.2f s (%"
            PRIu64 " ticks, %.1f/s), %" PRIu64 " failed (%.2f%%), %" PRIu64
            " missed of %" PRIu64 " ticks (%.2f%%)%s%s\n",
            d->nprocesses, d->nprocesses == 1 ? "" : "es", in->samples, secs,
            ticks, secs > 0 ? (double)ticks / secs : 0.0, in->failed,
            in->samples ? 100.0 * (double)in->failed / (double)in->samples
                        : 0.0,
            in->missed, expected,
            expected ? 100.0 * (double)in->missed / (double)expected : 0.0,
            ended ? "; " : "", ended ? ended : "");
}

/* Opens the named targets after the first, and the tree's watch. */
static int more_targets(run *r, const pyu_cmd_opts *o, int first_pid,
                        char *msg, size_t msglen)
{
    for (int i = 1; i < o->ntargets; i++) {
        int pid = (int)strtol(o->targets[i], NULL, 10);
        pyu_session *s = pyu_session_new();
        if (!s) {
            snprintf(msg, msglen, "out of memory");
            return PYU_EXIT_INTERNAL;
        }
        int rc = pyu_open_pid(s, pid, open_flags(o));
        if (rc == 0 && (rc = add_target(r, s, pid, true)) == 0)
            continue;
        if (r->diag)
            fprintf(r->diag, "pyunwind: error: process %d: %s\n", pid,
                    rc == -PYU_E_NOMEM ? "out of memory" : pyu_errmsg(s));
        r->ex = pyu_cmd_worse_exit(r->ex, pyu_cmd_exit_for(rc));
        pyu_session_free(s);
    }
    if (!o->subprocesses)
        return PYU_EXIT_OK;
    int roots[PYU_CMD_MAX_PROCESSES];
    size_t nroots = 0;
    if (first_pid > 0)
        roots[nroots++] = first_pid;
    for (int i = 1; i < o->ntargets && nroots < PYU_CMD_MAX_PROCESSES; i++)
        roots[nroots++] = (int)strtol(o->targets[i], NULL, 10);
    if (!(r->watch = pyu_proc_watch_new(roots, nroots))) {
        snprintf(msg, msglen, "out of memory");
        return PYU_EXIT_INTERNAL;
    }
    return PYU_EXIT_OK;
}

int pyu_cmd_sample_run(pyu_session *s, const pyu_cmd_opts *o,
                       const pyu_cmd_sample_hooks *h, pyu_profile *p,
                       FILE *diag, char *msg, size_t msglen)
{
    run r = {.o = o, .p = p, .diag = diag};
    int rc = add_target(&r, s, h->pid, false);
    if (rc < 0) {
        snprintf(msg, msglen, "%s", pyu_errmsg(s));
        free(r.t);
        return pyu_cmd_exit_for(rc);
    }
    pyu_profile_info *in = pyu_profile_info_of(p);
    uint64_t interval = o->rate > 0 ? (uint64_t)(1e9 / o->rate) : 0;
    in->interval_ns = interval;
    int ex = PYU_EXIT_OK;
    r.many = o->ntargets > 1 || o->subprocesses;
    if (r.many &&
        (ex = more_targets(&r, o, h->pid, msg, msglen)) != PYU_EXIT_OK) {
        for (size_t i = 0; i < r.n; i++)
            let_go(&r, &r.t[i], false, 0);
        free(r.t);
        return ex;
    }
    if (h->raw && (rc = pyu_capture_new(p, h->raw, &r.cap)) < 0) {
        snprintf(msg, msglen, "writing the capture failed: %s",
                 rc == -PYU_E_NOMEM ? "out of memory" : strerror(errno));
        pyu_capture_end(r.cap);
        for (size_t i = 0; i < r.n; i++)
            let_go(&r, &r.t[i], false, 0);
        free(r.t);
        pyu_proc_watch_free(r.watch);
        return PYU_EXIT_INTERNAL;
    }
    uint64_t start = now_ns(), tick = 0, last_status = start, next_scan = 0,
             ticks = 0;
    r.start = start;
    uint64_t deadline = o->duration > 0
                            ? start + (uint64_t)(o->duration * 1e9)
                            : UINT64_MAX;
    pyu_waiter wt;
    pyu_wait_start(&wt);
    pyu_follower fl;
    pyu_follow_start(&fl, !o->other_cpu &&
                              !(o->sample_flags & PYU_SAMPLE_BLOCKING),
                     interval);
    uint64_t seed = start | 1;
    uint64_t waited = 0; /* (when the last wait was to end, or 0) */
    missed_why why = {0};
    const char *ended = NULL;
    for (;;) {
        if (h->stop && *h->stop) {
            ended = "interrupted";
            break;
        }
        uint64_t t = now_ns();
        if (t >= deadline)
            break;
        if (t >= next_scan) {
            if (check_execs(&r, t)) {
                ended = "the target ran exec (another program)";
                break;
            }
            if (r.watch)
                discover(&r, t);
            next_scan = t + SCAN_EVERY_NS;
        }
        if (r.many && h->gone)
            h->gone(h->arg); /* (collects a program started here) */
        if (r.many && !r.live &&
            (!r.watch || !pyu_proc_watch_alive(r.watch))) {
            ended = r.n > 1 ? "every target exited" : "the target exited";
            break;
        }
        int one = PYU_EXIT_OK;
        ticks++;
        for (size_t i = 0; i < r.n && one == PYU_EXIT_OK; i++) {
            if (r.t[i].done)
                continue;
            if (i) /* (the first target's CPU was found before the wait) */
                pyu_follow(&fl, &wt, r.t[i].sm);
            uint64_t ti = i ? now_ns() : t;
            one = sample_one(&r, &r.t[i], ti, h, &ended, msg, msglen);
            in->busy_ns += now_ns() - ti;
        }
        if (one != PYU_EXIT_OK) {
            if (one > 0)
                ex = one;
            break;
        }
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
         * + k * interval, at a random point of it; served at once when
         * that is past, unless it is too late (follow.h) */
        uint64_t now = now_ns(), missed_before = in->missed, behind;
        tick = pyu_sched_next(start, interval, PYU_LATE_NS, tick, now,
                              &behind);
        if (behind) {
            uint64_t took = now - t, woke = waited && t > waited
                                                ? t - waited : 0;
            in->missed += behind;
            if (took >= woke) {
                why.slow += behind;
                why.slow_max_ns = took > why.slow_max_ns ? took
                                                         : why.slow_max_ns;
            } else {
                why.late += behind;
                why.late_max_ns = woke > why.late_max_ns ? woke
                                                         : why.late_max_ns;
            }
        }
        uint64_t due = start + tick * interval + pick(&seed) % interval;
        if (due > deadline)
            due = deadline;
        /* (a scan of the tree between two ticks far apart) */
        while (r.watch && next_scan < due && !(h->stop && *h->stop)) {
            pyu_wait_until(&wt, next_scan, h->stop);
            uint64_t ts = now_ns();
            check_execs(&r, ts); /* (r.many: --subprocesses) */
            discover(&r, ts);
            next_scan = ts + SCAN_EVERY_NS;
            now = ts;
        }
        for (size_t i = 0; i < r.n; i++)
            if (!r.t[i].done) { /* (the first target sampled next) */
                pyu_follow(&fl, &wt, r.t[i].sm);
                break;
            }
        pyu_follow_tick(&fl, &wt, in->missed != missed_before);
        waited = 0;
        if (due > now) {
            pyu_wait_until(&wt, due, h->stop);
            waited = due;
        }
    }
    /* (the ticks of the run's intervals still to be served at its end,
     * late: missed; but the one due at the end, which no run serves) */
    uint64_t loop_end = now_ns();
    if (loop_end > deadline)
        loop_end = deadline;
    uint64_t due_end = interval ? (loop_end - start) / interval : 0;
    pyu_wait_end(&wt);
    pyu_follow_end(&fl);
    in->duration_ns = now_ns() - start;
    if (due_end > tick + 1) {
        why.slow += due_end - tick - 1;
        in->missed += due_end - tick - 1;
    }
    if (r.cap && pyu_capture_end(r.cap) < 0 && ex == PYU_EXIT_OK) {
        snprintf(msg, msglen, "writing the capture failed: %s",
                 strerror(errno));
        ex = PYU_EXIT_INTERNAL;
    }
    if (h->status) {
        fputs("\r\033[K", h->status);
        fflush(h->status);
    }
    if (diag && r.many) {
        many_summary(diag, pyu_profile_get(p), ticks, ended);
        missed_line(diag, in, ticks, true, &why);
    } else if (diag) {
        pyu_cmd_sample_summary(diag, in, ended);
        missed_line(diag, in, in->samples, false, &why);
        if (o->verbose) {
            pyu_sampler_stats st;
            pyu_sampler_stats_get(r.t[0].sm, &st);
            stats_line(diag, &st);
            if (fl.moves)
                fprintf(diag, "pyunwind: read from the running thread's CPU "
                              "(moved %" PRIu64 " times%s%s)\n", fl.moves,
                        fl.used_realtime ? ", real-time priority" : "",
                        fl.on ? "" : "; left: the rate asked was more than "
                                     "it could serve");
        }
    }
    for (size_t i = 0; i < r.n; i++)
        let_go(&r, &r.t[i], false, 0);
    free(r.t);
    free(r.np);
    pyu_proc_watch_free(r.watch);
    if (ex == PYU_EXIT_OK && r.ex != PYU_EXIT_OK) {
        ex = r.ex;
        snprintf(msg, msglen, "some processes could not be sampled (above)");
    }
    return ex;
}
