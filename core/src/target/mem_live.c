/* Memory source: a live local process.
 *
 * Reads go through process_vm_readv, several ranges per call; when the
 * system call is refused (seccomp) or missing, through /proc/PID/mem.
 * Mappings come from /proc/PID/maps; files are opened through
 * /proc/PID/root so that a process in another mount namespace still works.
 * pause() stops every thread with PTRACE_SEIZE + PTRACE_INTERRUPT and
 * resume() detaches; when the process is already traced (a debugger holds
 * it) the read goes ahead without stopping it.
 */
#include "../internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LIVE_IOV_MAX 1024
#define LIVE_MAX_TASKS PYU_MAX_THREADS

typedef struct live_task {
    int tid;
    char state;    /* scheduler state before the pause */
    bool seized;   /* traced by us */
    bool attached; /* and stopped by us: detached at resume */
    int sig;       /* a signal caught on its way in: handed back at detach */
} live_task;

#define LIVE_STAT_FDS 256 /* /proc/PID/task/TID/stat files kept open */

typedef struct live_ctx {
    int pid;
    struct {
        int tid, fd;
    } stat_fd[LIVE_STAT_FDS]; /* fd 0 slots are free (never a /proc fd) */
    unsigned flags;
    int mem_fd;        /* /proc/PID/mem, opened on first need */
    bool use_mem_file; /* process_vm_readv refused */
    live_task *tasks;  /* owned; valid while paused */
    size_t ntasks;
    bool paused;
    /* a process in another pid namespace (a container): the thread ids
     * in its memory are that namespace's; /proc here wants ours */
    bool nested;
    struct ns_tid {
        int ns, host;
    } *tids; /* owned: the last mapping read */
    size_t ntids;
    pyu_dwfl *dwfl; /* native stacks, while paused */
} live_ctx;

static int errno_to_code(int e)
{
    switch (e) {
    case ESRCH:
        return -PYU_E_NOPROC;
    case EPERM:
    case EACCES:
        return -PYU_E_PERM;
    case EFAULT:
    case EIO:
    case EINVAL:
        return -PYU_E_FAULT;
    case ENOMEM:
        return -PYU_E_FAULT; /* the target has no such pages */
    default:
        return -PYU_E_IO;
    }
}

static int read_mem_file(live_ctx *c, const pyu_range *r, size_t n)
{
    if (c->mem_fd < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/mem", c->pid);
        c->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (c->mem_fd < 0)
            return errno == ENOENT ? -PYU_E_NOPROC : errno_to_code(errno);
    }
    for (size_t i = 0; i < n; i++) {
        size_t done = 0;
        if (r[i].addr > (uint64_t)INT64_MAX)
            return -PYU_E_FAULT;
        while (done < r[i].len) {
            ssize_t k = pread(c->mem_fd, (char *)r[i].buf + done,
                              r[i].len - done, (off_t)(r[i].addr + done));
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                return errno_to_code(errno);
            if (k == 0) /* process gone: its mem file reads empty */
                return kill(c->pid, 0) < 0 && errno == ESRCH
                           ? -PYU_E_NOPROC
                           : -PYU_E_FAULT;
            done += (size_t)k;
        }
    }
    return 0;
}

static int live_read(void *ctx, const pyu_range *r, size_t n)
{
    live_ctx *c = ctx;
    struct iovec local[LIVE_IOV_MAX], remote[LIVE_IOV_MAX];
    if (c->use_mem_file)
        return read_mem_file(c, r, n);
    while (n > 0) {
        size_t k = n < LIVE_IOV_MAX ? n : LIVE_IOV_MAX;
        size_t want = 0;
        for (size_t i = 0; i < k; i++) {
            local[i].iov_base = r[i].buf;
            local[i].iov_len = r[i].len;
            remote[i].iov_base = (void *)(uintptr_t)r[i].addr;
            remote[i].iov_len = r[i].len;
            want += r[i].len;
        }
        ssize_t got = process_vm_readv(c->pid, local, k, remote, k, 0);
        if (got < 0) {
            int e = errno;
            if (e == ENOSYS || e == EPERM) {
                /* refused or missing: /proc/PID/mem may still be allowed */
                int rc = read_mem_file(c, r, n);
                if (rc == 0)
                    c->use_mem_file = true;
                return rc;
            }
            return errno_to_code(e);
        }
        if ((size_t)got != want)
            return -PYU_E_FAULT;
        r += k;
        n -= k;
    }
    return 0;
}

/* The sampler's anchor: a few bytes, one call; never through
 * /proc/PID/mem (a write there would bypass the check the system call
 * makes). */
static int live_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
    live_ctx *c = ctx;
    struct iovec local = {(void *)buf, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    ssize_t put = process_vm_writev(c->pid, &local, 1, &remote, 1, 0);
    if (put < 0)
        return errno_to_code(errno);
    return (size_t)put == len ? 0 : -PYU_E_FAULT;
}

static int live_mappings(void *ctx, pyu_mapping_fn fn, void *arg)
{
    live_ctx *c = ctx;
    char path[64], line[PATH_MAX + 256];
    int rc = 0;
    snprintf(path, sizeof path, "/proc/%d/maps", c->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? -PYU_E_NOPROC : errno_to_code(errno);
    while (fgets(line, sizeof line, f)) {
        unsigned long long start, end, offset;
        char perms[8];
        int name_at = 0;
        pyu_mapping m;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end,
                   perms, &offset, &name_at) < 4)
            continue;
        char *name = line + name_at;
        size_t len = strlen(name);
        while (len && (name[len - 1] == '\n' || name[len - 1] == ' '))
            name[--len] = '\0';
        m.start = start;
        m.end = end;
        m.offset = offset;
        m.prot = (perms[0] == 'r' ? PYU_PROT_READ : 0) |
                 (perms[1] == 'w' ? PYU_PROT_WRITE : 0) |
                 (perms[2] == 'x' ? PYU_PROT_EXEC : 0);
        m.path = name[0] == '/' ? name : NULL;
        rc = fn(arg, &m);
        if (rc)
            break;
    }
    if (rc == 0 && ferror(f))
        rc = -PYU_E_IO;
    fclose(f);
    return rc;
}

static int live_file_path(void *ctx, const char *mapped, char *out,
                          size_t outlen)
{
    live_ctx *c = ctx;
    int n = snprintf(out, outlen, "/proc/%d/root%s", c->pid, mapped);
    if (n > 0 && (size_t)n < outlen && access(out, R_OK) == 0)
        return 0;
    n = snprintf(out, outlen, "%s", mapped);
    return (n > 0 && (size_t)n < outlen) ? 0 : -PYU_E_INVAL;
}

static char parse_state(char *buf, ssize_t n)
{
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return (p && p[1] == ' ' && p[2]) ? p[2] : 0;
}

static int open_stat(int pid, int tid)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    return open(path, O_RDONLY | O_CLOEXEC);
}

static char task_state(int pid, int tid)
{
    char buf[512];
    int fd = open_stat(pid, tid);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return parse_state(buf, n);
}

/* The stat line of a thread (into buf, NUL-terminated; its length, or 0
 * when the thread is gone) through a stat file kept open (samplers ask
 * every time: re-reading an open file costs far less than opening it). */
static ssize_t task_stat_cached(live_ctx *c, int tid, char *buf, size_t len)
{
    size_t h = (size_t)tid % LIVE_STAT_FDS;
    ssize_t n;
    if (c->stat_fd[h].fd > 0 && c->stat_fd[h].tid == tid) {
        n = pread(c->stat_fd[h].fd, buf, len - 1, 0);
        if (n > 0)
            return buf[n] = '\0', n;
        close(c->stat_fd[h].fd); /* the thread ended */
        c->stat_fd[h].fd = 0;
        return 0;
    }
    int fd = open_stat(c->pid, tid);
    if (fd <= 0)
        return 0;
    n = pread(fd, buf, len - 1, 0);
    if (c->stat_fd[h].fd > 0)
        close(c->stat_fd[h].fd);
    c->stat_fd[h].tid = tid;
    c->stat_fd[h].fd = fd;
    return n > 0 ? (buf[n] = '\0', n) : 0;
}

static char task_state_cached(live_ctx *c, int tid)
{
    char buf[512];
    return parse_state(buf, task_stat_cached(c, tid, buf, sizeof buf));
}

/* The ids of a task in each pid namespace from ours down ("NSpid:" of
 * its status file): how many (up to n). */
static int ns_pids(int pid, int tid, int *ids, int n)
{
    char path[96], line[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, tid);
    FILE *f = fopen(path, "re");
    int k = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "NSpid:", 6) == 0) {
            char *p = line + 6, *end;
            for (long v; k < n && (v = strtol(p, &end, 10), end != p);
                 p = end)
                ids[k++] = (int)v;
            break;
        }
    fclose(f);
    return k;
}

/* Reads which of our thread ids each of the process's threads has in its
 * own namespace (the innermost NSpid). */
static void map_tids(live_ctx *c)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", c->pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    size_t cap = 0;
    c->ntids = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && c->ntids < LIVE_MAX_TASKS) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        int ids[32];
        int k;
        if (*end || tid <= 0 || (k = ns_pids(c->pid, (int)tid, ids, 32)) < 1)
            continue;
        if (c->ntids == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct ns_tid *t = realloc(c->tids, ncap * sizeof *t);
            if (!t)
                break;
            c->tids = t;
            cap = ncap;
        }
        c->tids[c->ntids++] = (struct ns_tid){ids[k - 1], (int)tid};
    }
    closedir(d);
}

/* Our id of the thread the process knows as tid (its own namespace's),
 * or -1. */
static int host_tid(live_ctx *c, uint64_t tid)
{
    if (tid > INT_MAX)
        return -1;
    if (!c->nested)
        return (int)tid;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < c->ntids; i++)
            if (c->tids[i].ns == (int)tid)
                return c->tids[i].host;
        if (pass == 0)
            map_tids(c); /* (a thread new since the last reading) */
    }
    return -1;
}

/* Appends the tasks not yet listed; returns how many were new, or < 0. */
static int list_tasks(live_ctx *c, size_t *cap)
{
    char path[64];
    int added = 0;
    snprintf(path, sizeof path, "/proc/%d/task", c->pid);
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? -PYU_E_NOPROC : errno_to_code(errno);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end || tid <= 0)
            continue;
        bool known = false;
        for (size_t i = 0; i < c->ntasks && !known; i++)
            known = c->tasks[i].tid == tid;
        if (known)
            continue;
        if (c->ntasks == *cap) {
            size_t ncap = *cap ? *cap * 2 : 64;
            live_task *t;
            if (ncap > LIVE_MAX_TASKS ||
                !(t = realloc(c->tasks, ncap * sizeof *t)))
                break;
            c->tasks = t;
            *cap = ncap;
        }
        c->tasks[c->ntasks].tid = (int)tid;
        c->tasks[c->ntasks].state = task_state(c->pid, (int)tid);
        c->tasks[c->ntasks].seized = c->tasks[c->ntasks].attached = false;
        c->tasks[c->ntasks].sig = 0;
        c->ntasks++;
        added++;
    }
    closedir(d);
    return added;
}

static int live_resume(void *ctx)
{
    live_ctx *c = ctx;
    pyu_dwfl_free(c->dwfl); /* (before the threads run: it reads them) */
    c->dwfl = NULL;
    for (size_t i = 0; i < c->ntasks; i++)
        if (c->tasks[i].seized) {
            /* (one never seen stopped, of a dying process, refuses) */
            ptrace(PTRACE_DETACH, c->tasks[i].tid, NULL,
                   (void *)(intptr_t)c->tasks[i].sig);
            c->tasks[i].seized = c->tasks[i].attached = false;
        }
    c->paused = false;
    return 0;
}

/* Asks a thread to stop; stop_reported() then collects its stop. */
static bool seize(int tid)
{
    if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0)
        return false;
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0) {
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        return false;
    }
    return true;
}

/* Collects the thread's report of its stop or its end, waiting for it
 * when wait is set; false when there is none yet.  A stop other than our
 * interrupt is a signal on its way to the thread: t->sig gets it, for
 * the detach to deliver (detaching with 0 would drop it). */
static bool stop_reported(live_task *t, bool wait)
{
    for (;;) {
        int st;
        pid_t w = waitpid(t->tid, &st, __WALL | (wait ? 0 : WNOHANG));
        if (w < 0 && errno == EINTR)
            continue;
        if (w == 0)
            return false;
        if (w < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
            t->seized = t->attached = false; /* the thread is gone */
            return true;
        }
        if (WIFSTOPPED(st)) {
            if ((st >> 16) != PTRACE_EVENT_STOP)
                t->sig = WSTOPSIG(st);
            t->attached = true;
            return true;
        }
    }
}

/* Waits for the leader's stop, tasks[0..n) having stopped or ended.  A
 * process killed meanwhile reports its leader's end only after every
 * other thread's end was collected by its tracer, us, so the wait polls,
 * collecting the ends of the threads that had stopped; it gives up once
 * the leader has been a zombie (the process ending) for 20 ms. */
static void wait_leader(live_ctx *c, live_task *leader, size_t n)
{
    for (unsigned idle = 0; !stop_reported(leader, false); idle++) {
        if (idle < 16) {
            sched_yield();
            continue;
        }
        for (size_t i = 0; i < n; i++)
            if (c->tasks[i].attached && &c->tasks[i] != leader)
                stop_reported(&c->tasks[i], false);
        if (idle % 400 == 0) { /* (every 20 ms of 50 us naps) */
            char st = task_state(c->pid, c->pid);
            if (st == 0 || st == 'Z' || st == 'X')
                return; /* ending: resume detaches what it can */
        }
        nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

static int live_pause(void *ctx)
{
    live_ctx *c = ctx;
    size_t cap = c->ntasks;
    c->ntasks = 0;
    if (c->flags & PYU_OPEN_NONBLOCKING)
        return 0; /* scheduler states are then read per thread, on demand */
    /* Threads may start while we stop the others: list again until a pass
     * finds none new (bounded).  The threads of a pass are all asked to
     * stop before any is waited for: seven threads sharing a CPU then stop
     * in well under a millisecond (each stops as soon as it runs, and
     * gives the CPU to the next), not 55.  Every thread but the leader
     * reports its stop or its end whatever happens, so it is waited for;
     * the leader last (wait_leader). */
    for (int pass = 0; pass < 8; pass++) {
        size_t from = c->ntasks;
        int added = list_tasks(c, &cap);
        if (added < 0)
            return added;
        if (added == 0)
            break;
        live_task *leader = NULL;
        for (size_t i = from; i < c->ntasks; i++) {
            live_task *t = &c->tasks[i];
            /* a thread someone stopped (SIGSTOP) stays as it is: seizing
             * it and letting go would wake it for a moment */
            if (t->state == 'T')
                continue;
            t->seized = seize(t->tid);
            if (!t->seized && pass == 0 && i == 0 && kill(t->tid, 0) == 0) {
                /* cannot trace (a debugger holds it): read it running */
                live_resume(c);
                c->paused = true;
                return 0;
            }
            if (t->seized && t->tid == c->pid)
                leader = t;
        }
        for (size_t i = from; i < c->ntasks; i++)
            if (c->tasks[i].seized && &c->tasks[i] != leader)
                stop_reported(&c->tasks[i], true);
        if (leader)
            wait_leader(c, leader, c->ntasks);
    }
    c->paused = true;
    return 0;
}

static int live_thread_state(void *ctx, uint64_t ns_tid, char *state)
{
    live_ctx *c = ctx;
    if (c->flags & PYU_OPEN_NO_CPU_STATE)
        return -PYU_E_STATE;
    int tid = host_tid(c, ns_tid);
    if (tid < 0)
        return -PYU_E_NOPROC;
    for (size_t i = 0; i < c->ntasks; i++)
        if (c->tasks[i].tid == tid && c->tasks[i].state) {
            *state = c->tasks[i].state;
            return 0;
        }
    char st = task_state_cached(c, tid);
    if (!st)
        return -PYU_E_NOPROC;
    *state = st;
    return 0;
}

/* The CPU a thread runs on, or last ran on: field 39 ("processor") of
 * its stat line, 37 fields after the state. */
static int live_thread_cpu(void *ctx, uint64_t ns_tid, int *cpu)
{
    live_ctx *c = ctx;
    int tid = host_tid(c, ns_tid);
    if (tid < 0)
        return -PYU_E_NOPROC;
    char buf[1024];
    ssize_t n = task_stat_cached(c, tid, buf, sizeof buf);
    char *p = n > 0 ? strrchr(buf, ')') : NULL;
    if (!p)
        return -PYU_E_NOPROC;
    p += 2; /* the state */
    for (int field = 3; field < 39; p++)
        if (!*p)
            return -PYU_E_IO;
        else if (*p == ' ')
            field++;
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > 65535)
        return -PYU_E_IO;
    *cpu = (int)v;
    return 0;
}

static int live_thread_name(void *ctx, uint64_t ns_tid, char *out,
                            size_t outlen)
{
    live_ctx *c = ctx;
    char path[96];
    int tid = ns_tid == (uint64_t)c->pid ? c->pid : host_tid(c, ns_tid);
    if (tid < 0 || !outlen)
        return -PYU_E_INVAL;
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", c->pid, tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -PYU_E_NOPROC;
    ssize_t n = read(fd, out, outlen - 1);
    close(fd);
    if (n <= 0)
        return -PYU_E_IO;
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

/* The process's start: its start in clock ticks since boot (field 22 of
 * /proc/PID/stat, counted on the boot-time clock), put on the wall clock
 * by the two clocks' difference now. */
static int live_source_time(void *ctx, int64_t *sec, int *core)
{
    const live_ctx *c = ctx;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", c->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -PYU_E_NOPROC;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -PYU_E_IO;
    buf[n] = '\0';
    /* (after the command's closing parenthesis: field 3 on) */
    const char *p = strrchr(buf, ')');
    unsigned long long ticks = 0;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                     "%*u %*u %*d %*d %*d %*d %*d %*d %llu", &ticks) != 1)
        return -PYU_E_IO;
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec wall, boot;
    if (hz <= 0 || clock_gettime(CLOCK_REALTIME, &wall) < 0 ||
        clock_gettime(CLOCK_BOOTTIME, &boot) < 0)
        return -PYU_E_IO;
    double start = (double)wall.tv_sec - (double)boot.tv_sec +
                   (wall.tv_nsec - boot.tv_nsec) / 1e9 +
                   (double)ticks / (double)hz;
    *sec = (int64_t)start;
    *core = 0;
    return *sec > 0 ? 0 : -PYU_E_IO;
}

static int live_native_frames(void *ctx, uint64_t ns_tid, pyu_native_fn fn,
                              void *arg, char *why, size_t whylen)
{
    live_ctx *c = ctx;
    int tid = ns_tid == (uint64_t)c->pid ? c->pid : host_tid(c, ns_tid);
    const live_task *t = NULL;
    for (size_t i = 0; tid > 0 && i < c->ntasks; i++)
        if (c->tasks[i].tid == tid)
            t = &c->tasks[i];
    if (!c->paused || (c->flags & PYU_OPEN_NONBLOCKING)) {
        snprintf(why, whylen, "native stacks need the process stopped "
                 "(leave out --nonblocking)");
        return -PYU_E_STATE;
    }
    if (!t || !t->attached) {
        snprintf(why, whylen, "%s",
                 t && t->state == 'T'
                     ? "the thread was stopped by someone else (SIGSTOP): "
                       "pyunwind leaves it alone and cannot read its "
                       "registers"
                     : "pyunwind could not stop the thread with ptrace (is "
                       "a debugger attached? use py-dump --native inside "
                       "it)");
        return -PYU_E_STATE;
    }
    if (!c->dwfl) {
        pyu_err err = {0};
        if (pyu_dwfl_live(c->pid, &c->dwfl, &err) < 0) {
            snprintf(why, whylen, "%s", pyu_err_text(&err));
            return -err.code;
        }
    }
    pyu_err err = {0};
    int rc = pyu_dwfl_frames(c->dwfl, tid, fn, arg, &err);
    if (rc < 0)
        snprintf(why, whylen, "%s", pyu_err_text(&err));
    return rc;
}

static void live_destroy(void *ctx)
{
    live_ctx *c = ctx;
    if (!c)
        return;
    if (c->paused)
        live_resume(c);
    if (c->mem_fd >= 0)
        close(c->mem_fd);
    for (size_t i = 0; i < LIVE_STAT_FDS; i++)
        if (c->stat_fd[i].fd > 0)
            close(c->stat_fd[i].fd);
    free(c->tasks);
    free(c->tids);
    free(c);
}

const pyu_memory_ops pyu_live_ops = {
    .read = live_read,
    .mappings = live_mappings,
    .file_path = live_file_path,
    .pause = live_pause,
    .resume = live_resume,
    .thread_state = live_thread_state,
    .thread_cpu = live_thread_cpu,
    .destroy = live_destroy,
    .write = live_write,
    .thread_name = live_thread_name,
    .native_frames = live_native_frames,
    .source_time = live_source_time,
};

/* Whether process pid has exited and waits to be collected (a zombie:
 * no memory, no mappings left to read). */
static bool exited(int pid)
{
    char st = task_state(pid, pid);
    return st == 'Z' || st == 'X';
}

int pyu_live_create(int pid, unsigned flags, void **out, pyu_err *err)
{
    char path[64];
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return pyu_err_set(err, PYU_E_NOPROC, "no process with id %d", pid);
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    if (access(path, R_OK) < 0 || kill(pid, 0) < 0) {
        if (errno == ENOENT || errno == ESRCH)
            return pyu_err_set(err, PYU_E_NOPROC, "no process with id %d",
                               pid);
        if (errno == EACCES || errno == EPERM)
            return pyu_err_set(err, PYU_E_PERM,
                               "permission denied reading process %d: %s",
                               pid, PYU_PERM_REMEDY);
    }
    if (exited(pid))
        return pyu_err_set(err, PYU_E_NOPROC,
                           "process %d has exited (its parent has not "
                           "collected it yet)",
                           pid);
    live_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return pyu_err_set(err, PYU_E_NOMEM, "out of memory");
    c->pid = pid;
    c->flags = flags;
    c->mem_fd = -1;
    int ids[2];
    c->nested = ns_pids(pid, pid, ids, 2) > 1;
    *out = c;
    return 0;
}
