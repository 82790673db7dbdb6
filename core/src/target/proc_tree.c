/* A live process and its descendants, from /proc: every process's parent
 * (the fourth field of /proc/PID/stat), read once, then the tree walked
 * from the root.  (The kernel's own list of a thread's children,
 * /proc/PID/task/TID/children, is not built into every kernel.) */
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
