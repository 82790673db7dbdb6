/* A live process and its descendants, from /proc: every process's parent
 * (the fourth field of /proc/PID/stat), read once, then the tree walked
 * from the root; and a tree watched as it grows, each scan reading the
 * parents of the processes new since the last.  (The kernel's own list of
 * a thread's children, /proc/PID/task/TID/children, is not built into
 * every kernel; its process events connector wants CAP_NET_ADMIN.) */
#include "../internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TREE_MAX_PROCS (1u << 20) /* /proc entries read at most */

typedef struct proc_link {
    int pid, ppid;
} proc_link;

/* The parent of pid, or -1 when it cannot be read (it exited). */
static int parent_of(int pid)
{
    char path[48], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "PID (COMM) STATE PPID ...": COMM may hold anything, ')' too */
    char *end = strrchr(buf, ')');
    int ppid;
    char state;
    if (!end || sscanf(end + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return ppid;
}

static int by_parent(const void *a, const void *b)
{
    const proc_link *x = a, *y = b;
    if (x->ppid != y->ppid)
        return x->ppid < y->ppid ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* The first of the links sorted by parent whose parent is ppid. */
static size_t first_child(const proc_link *l, size_t n, int ppid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l[mid].ppid < ppid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int pyu_process_tree(int pid, int *pids, size_t max)
{
    if (pid <= 0 || parent_of(pid) < 0)
        return -PYU_E_NOPROC;
    if (max == 0)
        return 0;
    DIR *d = opendir("/proc");
    if (!d)
        return -PYU_E_IO;
    proc_link *l = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < TREE_MAX_PROCS) {
        char *end;
        long p = strtol(e->d_name, &end, 10);
        if (*end || p <= 0 || p == pid)
            continue;
        int ppid = parent_of((int)p);
        if (ppid <= 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            proc_link *m = realloc(l, ncap * sizeof *l);
            if (!m) {
                closedir(d);
                free(l);
                return -PYU_E_NOMEM;
            }
            l = m;
            cap = ncap;
        }
        l[n++] = (proc_link){(int)p, ppid};
    }
    closedir(d);
    if (n)
        qsort(l, n, sizeof *l, by_parent);
    /* depth first, with the output as the stack of where each level is:
     * next[k] is the index in l of the next child of pids[k] to visit */
    size_t *next = malloc(max * sizeof *next);
    if (!next) {
        free(l);
        return -PYU_E_NOMEM;
    }
    size_t out = 0, depth = 0;
    size_t *path = malloc(max * sizeof *path); /* output index per level */
    if (!path) {
        free(next);
        free(l);
        return -PYU_E_NOMEM;
    }
    pids[out] = pid;
    next[out] = first_child(l, n, pid);
    path[depth++] = out++;
    while (depth && out < max) {
        size_t at = path[depth - 1];
        size_t i = next[at];
        if (i >= n || l[i].ppid != pids[at]) {
            depth--; /* no more children here */
            continue;
        }
        next[at] = i + 1;
        pids[out] = l[i].pid;
        next[out] = first_child(l, n, l[i].pid);
        path[depth++] = out++; /* (a pid is met once: no cycles) */
    }
    free(path);
    free(next);
    free(l);
    return (int)out;
}

/* ------------------------------------------------------------- watching */

/* A process seen by the last scans. */
typedef struct watched {
    int pid, ppid;  /* 0: a free slot */
    uint32_t scan;  /* the last scan that listed it */
    bool member;    /* in the tree */
    bool reported;  /* handed out by a scan */
} watched;

struct pyu_proc_watch {
    watched *slots; /* open addressing by pid */
    size_t cap, n;
    uint32_t scan;
    int *roots;
    size_t nroots;
    size_t alive;
};

static size_t slot_of(const pyu_proc_watch *w, int pid)
{
    size_t i = ((size_t)(unsigned)pid * 2654435761u) & (w->cap - 1);
    while (w->slots[i].pid && w->slots[i].pid != pid)
        i = (i + 1) & (w->cap - 1);
    return i;
}

static bool watch_grow(pyu_proc_watch *w)
{
    if ((w->n + 1) * 2 <= w->cap)
        return true;
    size_t ncap = w->cap ? w->cap * 2 : 1024;
    watched *old = w->slots;
    size_t ocap = w->cap;
    if (!(w->slots = calloc(ncap, sizeof *w->slots))) {
        w->slots = old;
        return false;
    }
    w->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].pid)
            w->slots[slot_of(w, old[i].pid)] = old[i];
    free(old);
    return true;
}

pyu_proc_watch *pyu_proc_watch_new(const int *roots, size_t n)
{
    pyu_proc_watch *w = calloc(1, sizeof *w);
    if (!w || !(w->roots = malloc((n ? n : 1) * sizeof *roots))) {
        free(w);
        return NULL;
    }
    memcpy(w->roots, roots, n * sizeof *roots);
    w->nroots = n;
    return w;
}

void pyu_proc_watch_free(pyu_proc_watch *w)
{
    if (!w)
        return;
    free(w->slots);
    free(w->roots);
    free(w);
}

size_t pyu_proc_watch_alive(const pyu_proc_watch *w)
{
    return w->alive;
}

static bool is_root(const pyu_proc_watch *w, int pid)
{
    for (size_t i = 0; i < w->nroots; i++)
        if (w->roots[i] == pid)
            return true;
    return false;
}

/* The member processes not yet handed out whose parent is a member (or
 * that are roots), into pids from *out: parents first, since a pass goes
 * on while it finds any.  Returns false when max was reached. */
static bool hand_out(pyu_proc_watch *w, int *pids, size_t max, size_t *out)
{
    for (bool more = true; more;) {
        more = false;
        for (size_t i = 0; i < w->cap; i++) {
            watched *e = &w->slots[i];
            if (!e->pid || e->scan != w->scan || e->reported)
                continue;
            if (!e->member) {
                size_t k = slot_of(w, e->ppid);
                e->member = is_root(w, e->pid) ||
                            (w->slots[k].pid && w->slots[k].member &&
                             w->slots[k].reported);
            }
            if (!e->member)
                continue;
            if (*out == max)
                return false;
            pids[(*out)++] = e->pid;
            e->reported = true;
            more = true;
        }
    }
    return true;
}

int pyu_proc_watch_scan(pyu_proc_watch *w, int *pids, size_t max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -PYU_E_IO;
    w->scan++;
    struct dirent *e;
    size_t listed = 0;
    while ((e = readdir(d)) != NULL && listed < TREE_MAX_PROCS) {
        char *end;
        long p = strtol(e->d_name, &end, 10);
        if (*end || p <= 0 || p > INT32_MAX)
            continue;
        listed++;
        if (!watch_grow(w)) {
            closedir(d);
            return -PYU_E_NOMEM;
        }
        size_t i = slot_of(w, (int)p);
        if (!w->slots[i].pid) { /* new: its parent, once */
            int ppid = parent_of((int)p);
            if (ppid < 0)
                continue; /* (gone already) */
            w->slots[i] = (watched){(int)p, ppid, 0, false, false};
            w->n++;
        }
        w->slots[i].scan = w->scan;
    }
    closedir(d);
    size_t out = 0;
    hand_out(w, pids, max, &out);
    /* the processes no longer listed are forgotten (a pid used again is
     * another process); the tree's that are left are alive */
    w->alive = 0;
    bool gone = false;
    for (size_t i = 0; i < w->cap; i++) {
        if (!w->slots[i].pid)
            continue;
        if (w->slots[i].scan != w->scan)
            gone = true;
        else
            w->alive += w->slots[i].member;
    }
    if (gone) { /* (rehashed without them: open addressing has no holes) */
        watched *old = w->slots;
        size_t ocap = w->cap;
        if (!(w->slots = calloc(ocap, sizeof *w->slots))) {
            w->slots = old;
            return (int)out; /* (kept: forgotten at the next scan) */
        }
        w->n = 0;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].pid && old[i].scan == w->scan) {
                w->slots[slot_of(w, old[i].pid)] = old[i];
                w->n++;
            }
        free(old);
    }
    return (int)out;
}
