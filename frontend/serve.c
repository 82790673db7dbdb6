/* `pyunwind serve`: Go's net/http/pprof endpoints, served by libmicrohttpd
 * for CPython processes read from outside (docs/serve.md).
 *
 *   /debug/pprof/                 an index of the targets and endpoints
 *   /debug/pprof/profile          a profile of the next `seconds` (pprof)
 *   /debug/pprof/goroutine        every thread's stack now (pprof; debug=1
 *                                 a count per distinct stack, debug=2 the
 *                                 text of `pyunwind dump`)
 *   /debug/pprof/tasks            `pyunwind tasks` of the targets
 *   /debug/pprof/allocs, heap, block, mutex, threadcreate: 404, a Python
 *                                 process read from outside has none
 *
 * Requests are answered by a small pool of libmicrohttpd's threads.  A
 * profile request starts a scrape (scrape.h) and suspends its connection
 * until the scrape's loop says it has ended; everything else is answered
 * at once.  A dump stops the target for its read (as `pyunwind dump`);
 * requests that read one target that way take turns. */
#include "serve.h"
#include "command.h"
#include "scrape.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_LISTEN "127.0.0.1:6060"
#define MAX_SECONDS 3600
#define DEFAULT_SECONDS 30
#define DEFAULT_RATE 100
#define MAX_RATE 100000
#define POOL_THREADS 4
#define MAX_CONNECTIONS 4096
#define CONN_MEMORY (64u << 10) /* each connection's buffers: above 32 KiB,
                                   libmicrohttpd maps them (pages touched
                                   as used, and given back when it closes)
                                   instead of taking them from malloc's
                                   arenas, where a thousand connections'
                                   come and go left more behind each hour */
#define TRIM_EVERY_S 10
#define IDLE_TIMEOUT_S 30 /* a connection that sends nothing this long
                             is closed (a suspended one never is) */
#define PYTHON_RECHECK_NS 2000000000ull /* a process found not Python yet
                                           (a Python starting up) is looked
                                           at again after this long */

static const char help_text[] =
    "usage: pyunwind serve [--listen ADDR:PORT] [--verbose] PID... |\n"
    "                      --subprocesses PID... | --all\n"
    "\n"
    "Serves Go's pprof HTTP endpoints for CPython processes, read from\n"
    "outside: Parca, Grafana Pyroscope / Alloy and `go tool pprof` scrape\n"
    "them as they scrape a Go program.\n"
    "\n"
    "  PID...              these processes\n"
    "  --subprocesses      ... and their descendants that run CPython\n"
    "  --all               every CPython process this user may read,\n"
    "                      found as they start\n"
    "  --listen ADDR:PORT  where to listen (default " DEFAULT_LISTEN ");\n"
    "                      anything but a loopback address lets whoever\n"
    "                      reaches it read the targets' stacks\n"
    "  --verbose           a line on stderr for each request\n"
    "\n"
    "Endpoints (under /debug/pprof/):\n"
    "  profile?seconds=N   a profile of the next N seconds (default 30,\n"
    "                      1..3600): &mode=cpu|wall|gil|exception (cpu),\n"
    "                      &rate=HZ (100), &pid=P (one target)\n"
    "  goroutine           every thread's stack now; ?debug=1 a count per\n"
    "                      stack, ?debug=2 the text of `pyunwind dump`\n"
    "  tasks               the asyncio tasks (`pyunwind tasks`)\n"
    "  (allocs, heap, block, mutex: 404, a process read from outside has\n"
    "  no such profile)\n"
    "\n"
    "SIGINT or SIGTERM ends the server; the targets run on.\n";

/* A process met by --all or --subprocesses, and whether it runs CPython. */
typedef struct known {
    int pid;
    uint64_t start;   /* its start time (/proc/PID/stat field 22) */
    bool python;
    uint64_t checked; /* when it was looked at (monotonic ns) */
} known;

typedef struct server {
    pyu_scrapes *ss;
    int *pids; /* the PIDs given */
    size_t npids;
    bool all, subprocesses, verbose;
    pthread_mutex_t mu; /* known, dumping */
    known *known;
    size_t nknown, capknown;
    pthread_mutex_t dump_mu; /* reads that stop a target take turns (and
                                the command parser's getopt) */
} server;

/* A request's state across its handler's calls. */
typedef struct request {
    struct MHD_Connection *conn;
    pyu_scrape *scrape;
    pthread_mutex_t mu;
    bool done, suspended;
} request;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ targets */

/* Field 22 of /proc/PID/stat (when the process started), 0 when it cannot
 * be read or the process has exited (a zombie): with the pid, what tells
 * one process from a later one. */
static uint64_t start_of(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    if (!p || *p == '\0')
        return 0;
    p += 2; /* (field 3: the state) */
    if (*p == 'Z' || *p == 'X')
        return 0;
    for (int field = 3; p && field < 22; field++)
        p = (p = strchr(p, ' ')) ? p + 1 : NULL;
    return p ? strtoull(p, NULL, 10) : 0;
}

/* Whether pid runs CPython (opened once; remembered per process). */
static bool is_python(server *srv, int pid)
{
    uint64_t start = start_of(pid);
    if (!start)
        return false;
    uint64_t now = mono_ns();
    pthread_mutex_lock(&srv->mu);
    known *k = NULL;
    for (size_t i = 0; i < srv->nknown; i++)
        if (srv->known[i].pid == pid) {
            k = &srv->known[i];
            break;
        }
    if (k && k->start == start &&
        (k->python || now - k->checked < PYTHON_RECHECK_NS)) {
        bool py = k->python;
        pthread_mutex_unlock(&srv->mu);
        return py;
    }
    pthread_mutex_unlock(&srv->mu);
    pyu_session *s = pyu_session_new();
    bool py = s && pyu_open_pid(s, pid, PYU_OPEN_NONBLOCKING |
                                            PYU_OPEN_NO_CPU_STATE) == 0;
    pyu_session_free(s);
    pthread_mutex_lock(&srv->mu);
    for (size_t i = 0; !k && i < srv->nknown; i++)
        if (srv->known[i].pid == pid)
            k = &srv->known[i];
    if (!k && srv->nknown == srv->capknown) {
        size_t n = srv->capknown ? srv->capknown * 2 : 64;
        known *nk = realloc(srv->known, n * sizeof *nk);
        if (nk) {
            srv->known = nk;
            srv->capknown = n;
        }
    }
    if (!k && srv->nknown < srv->capknown)
        k = &srv->known[srv->nknown++];
    if (k)
        *k = (known){pid, start, py, now};
    pthread_mutex_unlock(&srv->mu);
    return py;
}

/* Forgets the processes that are gone. */
static void forget_gone(server *srv)
{
    pthread_mutex_lock(&srv->mu);
    for (size_t i = 0; i < srv->nknown;) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d", srv->known[i].pid);
        if (access(path, F_OK) != 0)
            srv->known[i] = srv->known[--srv->nknown];
        else
            i++;
    }
    pthread_mutex_unlock(&srv->mu);
}

static bool add_pid(int **pids, size_t *n, size_t *cap, int pid)
{
    for (size_t i = 0; i < *n; i++)
        if ((*pids)[i] == pid)
            return true;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        int *p = realloc(*pids, c * sizeof *p);
        if (!p)
            return false;
        *pids = p;
        *cap = c;
    }
    (*pids)[(*n)++] = pid;
    return true;
}

/* The targets now: the PIDs given that still run, their descendants that
 * run CPython (--subprocesses), or every CPython process this user may
 * read (--all).  Returns how many (in *out, to free), or -1 when out of
 * memory. */
static long targets_now(server *srv, int **out)
{
    int *pids = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    forget_gone(srv);
    if (srv->all) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        int self = getpid();
        while (ok && d && (e = readdir(d))) {
            char *end;
            long pid = strtol(e->d_name, &end, 10);
            if (*end || pid <= 0 || pid == self)
                continue;
            if (is_python(srv, (int)pid))
                ok = add_pid(&pids, &n, &cap, (int)pid);
        }
        if (d)
            closedir(d);
    }
    for (size_t i = 0; ok && i < srv->npids; i++) {
        if (!srv->subprocesses) {
            if (start_of(srv->pids[i]))
                ok = add_pid(&pids, &n, &cap, srv->pids[i]);
            continue;
        }
        static int tree[PYU_CMD_MAX_PROCESSES];
        static pthread_mutex_t tree_mu = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&tree_mu);
        int m = pyu_process_tree(srv->pids[i], tree, PYU_CMD_MAX_PROCESSES);
        for (int j = 0; ok && j < m; j++)
            if (j == 0 || is_python(srv, tree[j]))
                ok = add_pid(&pids, &n, &cap, tree[j]);
        pthread_mutex_unlock(&tree_mu);
    }
    if (!ok) {
        free(pids);
        return -1;
    }
    *out = pids;
    return (long)n;
}

/* ---------------------------------------------------------- responses */

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status,
                               const char *type, void *body, size_t len,
                               enum MHD_ResponseMemoryMode mem)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mem);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* A one-line text answer (an error's reason). */
static enum MHD_Result say(struct MHD_Connection *c, unsigned status,
                           const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result say(struct MHD_Connection *c, unsigned status,
                           const char *fmt, ...)
{
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    line[n] = '\0';
    return respond(c, status, "text/plain; charset=utf-8", line, (size_t)n,
                   MHD_RESPMEM_MUST_COPY);
}

/* A memory stream's text as the answer (closed here: then *buf and *len
 * are its text). */
static enum MHD_Result send_stream(struct MHD_Connection *c, unsigned status,
                                   const char *type, FILE *f, char **buf,
                                   size_t *len)
{
    fclose(f);
    return respond(c, status, type, *buf, *len, MHD_RESPMEM_MUST_FREE);
}

/* Every profile served carries its process's labels (pid, process). */
static const pyu_write_opts labelled = {0, 0, NULL,
                                        PYU_WRITE_PROCESS_LABELS};

/* ---------------------------------------------------------- parameters */

/* A request's query parameters, checked against the names an endpoint
 * takes. */
typedef struct params {
    const char *const *names; /* NULL-terminated */
    const char *bad;          /* the first unknown name */
    char bad_buf[64];
} params;

static enum MHD_Result check_name(void *cls, enum MHD_ValueKind kind,
                                  const char *key, const char *value)
{
    (void)kind;
    (void)value;
    params *p = cls;
    for (const char *const *n = p->names; *n; n++)
        if (strcmp(*n, key) == 0)
            return MHD_YES;
    snprintf(p->bad_buf, sizeof p->bad_buf, "%s", key);
    p->bad = p->bad_buf;
    return MHD_NO;
}

/* The names a request gives that an endpoint does not take: NULL when
 * none, else the first (valid until p goes). */
static const char *unknown_param(struct MHD_Connection *c, params *p)
{
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, check_name, p);
    return p->bad;
}

/* An integer parameter in [lo, hi]: 1 (in *v), 0 when absent (*v
 * unchanged), -1 when not such an integer. */
static int int_param(struct MHD_Connection *c, const char *name, long lo,
                     long hi, long *v)
{
    const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                name);
    if (!s)
        return 0;
    if (!*s || strlen(s) > 12)
        return -1;
    for (const char *q = s; *q; q++)
        if (!isdigit((unsigned char)*q))
            return -1;
    long x = strtol(s, NULL, 10);
    if (x < lo || x > hi)
        return -1;
    *v = x;
    return 1;
}

/* The targets a request reads: all of them, or the one ?pid= names.
 * Returns how many (in *pids, to free), or -1 when the request has been
 * answered (a bad pid, none: *r is the answer's). */
static long which_targets(server *srv, struct MHD_Connection *c, int **pids,
                          enum MHD_Result *r)
{
    long pid = 0;
    if (int_param(c, "pid", 1, INT32_MAX, &pid) < 0) {
        *r = say(c, MHD_HTTP_BAD_REQUEST, "pid must be a process id");
        return -1;
    }
    long n = targets_now(srv, pids);
    if (n < 0) {
        *r = say(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        return -1;
    }
    if (pid) {
        bool found = false;
        for (long i = 0; i < n; i++)
            found |= (*pids)[i] == pid;
        if (!found) {
            free(*pids);
            *r = say(c, MHD_HTTP_NOT_FOUND,
                     "process %ld is not one of this server's targets "
                     "(see /debug/pprof/)",
                     pid);
            return -1;
        }
        (*pids)[0] = (int)pid;
        n = 1;
    }
    if (n == 0) {
        free(*pids);
        *r = say(c, MHD_HTTP_NOT_FOUND, "no target is running CPython now");
        return -1;
    }
    return n;
}

/* ------------------------------------------------------------ profile */

static void scrape_done(void *arg)
{
    request *rq = arg;
    pthread_mutex_lock(&rq->mu);
    rq->done = true;
    if (rq->suspended) {
        rq->suspended = false;
        MHD_resume_connection(rq->conn);
    }
    pthread_mutex_unlock(&rq->mu);
}

static const char *const profile_params[] = {"seconds", "mode", "rate",
                                             "pid", NULL};

static enum MHD_Result profile_start(server *srv, request *rq,
                                     struct MHD_Connection *c)
{
    params pp = {.names = profile_params};
    const char *bad = unknown_param(c, &pp);
    if (bad)
        return say(c, MHD_HTTP_BAD_REQUEST,
                   "unknown parameter '%s' (profile takes seconds, mode, "
                   "rate and pid)",
                   bad);
    long seconds = DEFAULT_SECONDS, rate = DEFAULT_RATE;
    if (int_param(c, "seconds", 1, MAX_SECONDS, &seconds) < 0)
        return say(c, MHD_HTTP_BAD_REQUEST,
                   "seconds must be a whole number from 1 to %d",
                   MAX_SECONDS);
    if (int_param(c, "rate", 1, MAX_RATE, &rate) < 0)
        return say(c, MHD_HTTP_BAD_REQUEST,
                   "rate must be a whole number of samples a second from "
                   "1 to %d",
                   MAX_RATE);
    const char *m = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                "mode");
    int mode = PYU_MODE_CPU;
    if (m) {
        static const char *const names[] = {"wall", "cpu", "gil",
                                            "exception"};
        mode = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(m, names[i]) == 0)
                mode = i;
        if (mode < 0)
            return say(c, MHD_HTTP_BAD_REQUEST,
                       "mode must be cpu, wall, gil or exception");
    }
    int *pids;
    enum MHD_Result r;
    long n = which_targets(srv, c, &pids, &r);
    if (n < 0)
        return r;
    pyu_scrape_opts so = {pids, (size_t)n, mode, (double)rate,
                          (double)seconds, scrape_done, rq};
    int rc = pyu_scrape_start(srv->ss, &so, &rq->scrape);
    free(pids);
    if (rc < 0)
        return say(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                   "the profile could not start (%s)",
                   rc == -PYU_E_NOMEM ? "out of memory"
                                      : "the server is stopping");
    pthread_mutex_lock(&rq->mu);
    if (!rq->done) {
        rq->suspended = true;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&rq->mu);
    return MHD_YES;
}

/* The scrape has ended: its profile, or why there is none. */
static enum MHD_Result profile_end(request *rq, struct MHD_Connection *c)
{
    pyu_profile *p = pyu_scrape_profile(rq->scrape);
    const char *err = pyu_scrape_error(rq->scrape);
    if (!p || *err)
        return say(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s",
                   *err ? err : "the profile ended early");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return say(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    if (pyu_profile_write(p, "pprof", &labelled, f) < 0) {
        fclose(f);
        free(buf);
        return say(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                   "the profile could not be written");
    }
    return send_stream(c, MHD_HTTP_OK, "application/octet-stream", f, &buf, &len);
}

/* ---------------------------------------------------- dumps and tasks */

/* Runs `pyunwind dump` or `tasks` (argv0) on pids; its text in *buf. */
static int run_text(server *srv, const char *argv0, const int *pids, long n,
                    char **buf, size_t *len)
{
    char **argv = calloc((size_t)n + 2, sizeof *argv);
    char (*num)[16] = calloc((size_t)n, sizeof *num);
    FILE *f = open_memstream(buf, len);
    int ex = PYU_EXIT_INTERNAL;
    if (argv && num && f) {
        int argc = 0;
        argv[argc++] = (char *)argv0;
        for (long i = 0; i < n; i++) {
            snprintf(num[i], sizeof num[i], "%d", pids[i]);
            argv[argc++] = num[i];
        }
        pyu_cmd_opts o;
        char msg[512];
        enum pyu_cmd_kind kind =
            strcmp(argv0, "tasks") == 0 ? PYU_CMD_TASKS : PYU_CMD_DUMP;
        /* (the parser is getopt's, whose state is global: one request
         * at a time parses; what goes wrong with one process is a line
         * of the text, for the reader of the page to see) */
        pthread_mutex_lock(&srv->dump_mu);
        ex = pyu_cmd_parse(&o, kind, PYU_CMD_CLI, argc, argv, msg,
                           sizeof msg);
        if (ex == PYU_EXIT_OK)
            ex = pyu_cmd_run_targets(&o, f, f, msg, sizeof msg);
        pthread_mutex_unlock(&srv->dump_mu);
    }
    if (f)
        fclose(f);
    else
        *buf = NULL;
    free(argv);
    free(num);
    return ex;
}

/* The text of `pyunwind dump` or `tasks` (argv0) of pids (freed here) as
 * the answer: 200 also when some process could not be read whole (the
 * text says so), else 500. */
static enum MHD_Result text_reply(server *srv, struct MHD_Connection *c,
                                  const char *argv0, int *pids, long n)
{
    char *buf = NULL;
    size_t len = 0;
    int ex = run_text(srv, argv0, pids, n, &buf, &len);
    free(pids);
    if (!buf)
        return say(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    return respond(c,
                   ex == PYU_EXIT_OK || ex == PYU_EXIT_PARTIAL
                       ? MHD_HTTP_OK
                       : MHD_HTTP_INTERNAL_SERVER_ERROR,
                   "text/plain; charset=utf-8", buf, len,
                   MHD_RESPMEM_MUST_FREE);
}

/* A dump of each target, as a profile of one sample a thread. */
static int dump_profile(server *srv, const int *pids, long n,
                        pyu_profile *p, char *msg, size_t msglen)
{
    int got = 0;
    for (long i = 0; i < n; i++) {
        pyu_session *s = pyu_session_new();
        pyu_dump *d = NULL;
        int rc = s ? pyu_open_pid(s, pids[i], 0) : -PYU_E_NOMEM;
        if (rc == 0) {
            pthread_mutex_lock(&srv->dump_mu);
            rc = pyu_cmd_take_dump(s, 0, true, &d);
            pthread_mutex_unlock(&srv->dump_mu);
        }
        if (rc < 0 && !d) {
            snprintf(msg, msglen, "process %d: %s", pids[i],
                     s ? pyu_errmsg(s) : "out of memory");
            pyu_session_free(s);
            continue;
        }
        char cmd[1024];
        pyu_cmd_command_of(pids[i], cmd, sizeof cmd);
        long proc = pyu_profile_add_process(p, pids[i], cmd,
                                            d->process.python,
                                            d->process.free_threaded, 0);
        if (!pyu_profile_info_of(p)->process.pid)
            pyu_profile_info_of(p)->process = d->process;
        for (size_t t = 0; proc >= 0 && t < d->nthreads; t++) {
            const pyu_thread *th = &d->threads[t];
            long pt = pyu_profile_add_process_thread(
                p, (uint32_t)proc, th->thread_id, th->native_thread_id,
                th->interpreter_id, th->main);
            long node = 0;
            for (size_t k = th->nframes; pt >= 0 && node >= 0 && k-- > 0;) {
                const pyu_frame *fr = &th->frames[k];
                long fn = pyu_profile_add_func(p, fr->function, fr->file, 0,
                                               PYU_FUNC_PYTHON);
                long frame =
                    fn < 0 ? fn : pyu_profile_add_frame(p, (uint32_t)fn,
                                                        fr->line);
                node = frame < 0 ? frame
                                 : pyu_profile_push(p, (uint32_t)node,
                                                    (uint32_t)frame);
            }
            if (pt >= 0 && node >= 0)
                pyu_profile_count(p, (uint32_t)pt, (uint32_t)node, 1,
                                  th->status);
        }
        got++;
        pyu_dump_free(d);
        pyu_session_free(s);
    }
    pyu_profile_info *in = pyu_profile_info_of(p);
    in->mode = PYU_MODE_WALL;
    in->samples = 1;
    return got;
}

/* Go's debug=1 text: how many threads have each stack, and the stack. */
static void write_counts(pyu_profile *p, FILE *f)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    fprintf(f, "thread profile: total %" PRIu64 "\n", d->total);
    /* (a stack of several threads once: the stacks of one node summed) */
    for (size_t i = 0; i < d->nstacks; i++) {
        uint32_t node = d->stacks[i].node;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = d->stacks[j].node == node;
        if (seen)
            continue;
        uint64_t count = 0;
        for (size_t j = i; j < d->nstacks; j++)
            if (d->stacks[j].node == node)
                count += d->stacks[j].count;
        fprintf(f, "%" PRIu64 " @\n", count);
        for (uint32_t at = node; at != 0; at = d->nodes[at].parent) {
            const pyu_profile_frame *fr = &d->frames[d->nodes[at].frame];
            const pyu_profile_func *fn = &d->funcs[fr->func];
            fprintf(f, "#\t%s\t%s:%d\n", fn->name, fn->file, fr->line);
        }
        fputc('\n', f);
    }
}

static const char *const goroutine_params[] = {"debug", "pid", NULL};
static const char *const tasks_params[] = {"pid", NULL};

static enum MHD_Result goroutine(server *srv, struct MHD_Connection *c)
{
    params pp = {.names = goroutine_params};
    const char *bad = unknown_param(c, &pp);
    if (bad)
        return say(c, MHD_HTTP_BAD_REQUEST,
                   "unknown parameter '%s' (goroutine takes debug and pid)",
                   bad);
    long debug = 0;
    if (int_param(c, "debug", 0, 2, &debug) < 0)
        return say(c, MHD_HTTP_BAD_REQUEST, "debug must be 0, 1 or 2");
    int *pids;
    enum MHD_Result r;
    long n = which_targets(srv, c, &pids, &r);
    if (n < 0)
        return r;
    char *buf = NULL;
    size_t len = 0;
    if (debug == 2)
        return text_reply(srv, c, "dump", pids, n);
    pyu_profile *p = pyu_profile_new();
    char msg[512] = "out of memory";
    int got = p ? dump_profile(srv, pids, n, p, msg, sizeof msg) : 0;
    free(pids);
    if (got == 0) {
        pyu_profile_free(p);
        return say(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s", msg);
    }
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        pyu_profile_free(p);
        return say(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    bool ok = true;
    if (debug == 1)
        write_counts(p, f);
    else
        ok = pyu_profile_write(p, "pprof", &labelled, f) == 0;
    pyu_profile_free(p);
    if (!ok) {
        fclose(f);
        free(buf);
        return say(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                   "the profile could not be written");
    }
    return send_stream(c, MHD_HTTP_OK,
                       debug ? "text/plain; charset=utf-8"
                             : "application/octet-stream",
                       f, &buf, &len);
}

static enum MHD_Result tasks(server *srv, struct MHD_Connection *c)
{
    params pp = {.names = tasks_params};
    const char *bad = unknown_param(c, &pp);
    if (bad)
        return say(c, MHD_HTTP_BAD_REQUEST,
                   "unknown parameter '%s' (tasks takes pid)", bad);
    int *pids;
    enum MHD_Result r;
    long n = which_targets(srv, c, &pids, &r);
    if (n < 0)
        return r;
    return text_reply(srv, c, "tasks", pids, n);
}

/* -------------------------------------------------------------- index */

/* Text as HTML text. */
static void html(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

static enum MHD_Result index_page(server *srv, struct MHD_Connection *c)
{
    int *pids = NULL;
    long n = targets_now(srv, &pids);
    if (n < 0)
        return say(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        free(pids);
        return say(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<title>/debug/pprof/</title><link rel=\"icon\" href=\"data:,\">"
          "</head>\n<body>\n"
          "<h1>/debug/pprof/</h1>\n"
          "<p>pyunwind serve: CPython processes read from outside.</p>\n"
          "<h2>Profiles</h2>\n<table>\n"
          "<tr><td><a href=\"profile?seconds=30\">profile</a></td>"
          "<td>where the targets spend their time over the next "
          "<code>seconds</code> (pprof; <code>mode=cpu|wall|gil|"
          "exception</code>, <code>rate=</code>, <code>pid=</code>)</td>"
          "</tr>\n"
          "<tr><td><a href=\"goroutine?debug=1\">goroutine</a></td>"
          "<td>every thread's stack now (<a href=\"goroutine\">pprof</a>, "
          "<a href=\"goroutine?debug=1\">counts</a>, "
          "<a href=\"goroutine?debug=2\">dump</a>)</td></tr>\n"
          "<tr><td><a href=\"tasks\">tasks</a></td>"
          "<td>asyncio tasks</td></tr>\n</table>\n",
          f);
    fprintf(f, "<h2>Targets (%ld)</h2>\n<table id=\"targets\">\n"
               "<tr><th>pid</th><th>command</th><th></th></tr>\n",
            n);
    for (long i = 0; i < n; i++) {
        char cmd[1024];
        pyu_cmd_command_of(pids[i], cmd, sizeof cmd);
        fprintf(f, "<tr><td>%d</td><td>", pids[i]);
        html(f, cmd);
        fprintf(f, "</td><td><a href=\"goroutine?debug=2&amp;pid=%d\">"
                   "dump</a> <a href=\"profile?seconds=10&amp;pid=%d\">"
                   "profile</a></td></tr>\n",
                pids[i], pids[i]);
    }
    fputs("</table>\n</body></html>\n", f);
    free(pids);
    return send_stream(c, MHD_HTTP_OK, "text/html; charset=utf-8", f, &buf,
                       &len);
}

/* -------------------------------------------------------------- routes */

#define PREFIX "/debug/pprof/"

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)version;
    (void)upload;
    server *srv = cls;
    request *rq = *state;
    if (rq) {
        if (*upload_size) { /* (a body: not read) */
            *upload_size = 0;
            return MHD_YES;
        }
        if (rq->scrape)
            return profile_end(rq, c);
        return say(c, MHD_HTTP_BAD_REQUEST, "a request has no body here");
    }
    rq = calloc(1, sizeof *rq);
    if (!rq)
        return MHD_NO;
    rq->conn = c;
    pthread_mutex_init(&rq->mu, NULL);
    *state = rq;
    if (srv->verbose)
        fprintf(stderr, "pyunwind serve: %s %s\n", method, url);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return say(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                   "only GET and HEAD are served here");
    if (strcmp(url, "/debug/pprof") == 0 || strcmp(url, PREFIX) == 0 ||
        strcmp(url, "/") == 0)
        return index_page(srv, c);
    if (strcmp(url, "/favicon.ico") == 0) /* (a browser asks: no icon) */
        return respond(c, MHD_HTTP_NO_CONTENT, "image/x-icon", NULL, 0,
                       MHD_RESPMEM_PERSISTENT);
    if (strncmp(url, PREFIX, strlen(PREFIX)) != 0)
        return say(c, MHD_HTTP_NOT_FOUND,
                   "no such page: %s (the endpoints are under %s)", url,
                   PREFIX);
    const char *name = url + strlen(PREFIX);
    if (strcmp(name, "profile") == 0)
        return profile_start(srv, rq, c);
    if (strcmp(name, "goroutine") == 0)
        return goroutine(srv, c);
    if (strcmp(name, "tasks") == 0)
        return tasks(srv, c);
    static const char *const none[] = {"allocs", "heap", "block", "mutex",
                                       "threadcreate"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        if (strcmp(name, none[i]) == 0)
            return say(c, MHD_HTTP_NOT_FOUND,
                       "no %s profile: a Python process read from outside "
                       "has none (the profiles are profile, goroutine and "
                       "tasks)",
                       name);
    return say(c, MHD_HTTP_NOT_FOUND,
               "no such profile: %s (see %s)", name, PREFIX);
}

static void completed(void *cls, struct MHD_Connection *c, void **state,
                      enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    server *srv = cls;
    request *rq = *state;
    if (!rq)
        return;
    pyu_scrape_free(srv->ss, rq->scrape);
    pthread_mutex_destroy(&rq->mu);
    free(rq);
    *state = NULL;
}

/* ---------------------------------------------------------------- main */

/* ADDR:PORT (an IPv6 address in brackets) into *sa.  Returns its length,
 * or 0 with a message. */
static socklen_t parse_listen(const char *arg, struct sockaddr_storage *sa,
                              bool *v6, char *msg, size_t msglen)
{
    char host[128];
    const char *colon = strrchr(arg, ':');
    if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof host) {
        snprintf(msg, msglen,
                 "--listen %s: give ADDR:PORT (127.0.0.1:6060, [::1]:6060)",
                 arg);
        return 0;
    }
    memcpy(host, arg, (size_t)(colon - arg));
    host[colon - arg] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || colon[1] == '\0' || port < 0 || port > 65535) {
        snprintf(msg, msglen, "--listen %s: the port must be 0-65535", arg);
        return 0;
    }
    memset(sa, 0, sizeof *sa);
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)sa;
        if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) == 1) {
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)port);
            *v6 = true;
            return sizeof *s6;
        }
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)sa;
        if (strcmp(host, "localhost") == 0)
            strcpy(host, "127.0.0.1");
        if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)port);
            *v6 = false;
            return sizeof *s4;
        }
    }
    snprintf(msg, msglen,
             "--listen %s: '%s' is not an IP address (names are not looked "
             "up)",
             arg, host);
    return 0;
}

static bool loopback(const struct sockaddr_storage *sa)
{
    if (sa->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >>
                24) == 127;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) ||
           (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    server *srv = cls;
    if (!srv->verbose)
        return;
    fputs("pyunwind serve: libmicrohttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* As many open files as the hard limit allows: each connection is one. */
static void more_files(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void give_back_memory(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

static int fail(const char *msg, int code)
{
    fprintf(stderr, "pyunwind: error: %s\n", msg);
    return code;
}

int pyu_cmd_serve(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"all", no_argument, NULL, 'a'},
        {"subprocesses", no_argument, NULL, 's'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    server srv = {0};
    const char *listen = DEFAULT_LISTEN;
    char msg[600];
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "+hv", longopts, NULL)) != -1) {
        switch (ch) {
        case 'l': listen = optarg; break;
        case 'a': srv.all = true; break;
        case 's': srv.subprocesses = true; break;
        case 'v': srv.verbose = true; break;
        case 'h': fputs(help_text, stdout); return PYU_EXIT_OK;
        default:
            snprintf(msg, sizeof msg,
                     "serve: unknown option or missing value: %s (see "
                     "pyunwind serve --help)",
                     argv[optind - 1]);
            return fail(msg, PYU_EXIT_USAGE);
        }
    }
    size_t cap = 0;
    for (int i = optind; i < argc; i++) {
        char *end;
        long pid = strtol(argv[i], &end, 10);
        if (*end || pid <= 0 || pid > INT32_MAX) {
            snprintf(msg, sizeof msg, "serve: '%s' is not a process id",
                     argv[i]);
            free(srv.pids);
            return fail(msg, PYU_EXIT_USAGE);
        }
        if (!add_pid(&srv.pids, &srv.npids, &cap, (int)pid))
            return fail("out of memory", PYU_EXIT_INTERNAL);
    }
    if (srv.all == (srv.npids > 0) || (srv.subprocesses && !srv.npids)) {
        free(srv.pids);
        return fail(srv.all ? "serve: --all takes no PIDs"
                            : "serve: give PIDs (with --subprocesses, their "
                              "descendants too) or --all",
                    PYU_EXIT_USAGE);
    }
    struct sockaddr_storage sa;
    bool v6 = false;
    socklen_t salen = parse_listen(listen, &sa, &v6, msg, sizeof msg);
    if (!salen) {
        free(srv.pids);
        return fail(msg, PYU_EXIT_USAGE);
    }
    /* the PIDs given must be CPython processes this user can read */
    for (size_t i = 0; i < srv.npids; i++) {
        pyu_session *s = pyu_session_new();
        int rc = s ? pyu_open_pid(s, srv.pids[i], PYU_OPEN_NONBLOCKING |
                                                       PYU_OPEN_NO_CPU_STATE)
                   : -PYU_E_NOMEM;
        if (rc < 0) {
            snprintf(msg, sizeof msg, "process %d: %s", srv.pids[i],
                     s ? pyu_errmsg(s) : "out of memory");
            pyu_session_free(s);
            free(srv.pids);
            return fail(msg, pyu_cmd_exit_for(rc));
        }
        pyu_session_free(s);
    }
    more_files();
    /* SIGINT and SIGTERM are waited for here; every other thread has
     * them blocked (they inherit this mask) */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_init(&srv.mu, NULL);
    pthread_mutex_init(&srv.dump_mu, NULL);
    srv.ss = pyu_scrapes_new(srv.verbose ? stderr : NULL);
    if (!srv.ss)
        return fail("out of memory", PYU_EXIT_INTERNAL);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     (v6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, &srv, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, &srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)POOL_THREADS,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_NOTIFY_COMPLETED, completed, &srv, MHD_OPTION_END);
    int ex = PYU_EXIT_OK;
    if (!d) {
        snprintf(msg, sizeof msg,
                 "--listen %s: cannot listen there (%s)", listen,
                 errno == EADDRINUSE ? "the address is in use"
                 : errno           ? strerror(errno)
                                   : "libmicrohttpd refused");
        ex = fail(msg, PYU_EXIT_USAGE);
    } else {
        const union MHD_DaemonInfo *di =
            MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        unsigned port = di ? di->port : 0;
        char host[INET6_ADDRSTRLEN] = "";
        if (sa.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, host,
                      sizeof host);
        else
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr,
                      host, sizeof host);
        fprintf(stderr, "pyunwind serve: listening on http://%s%s%s:%u%s\n",
                v6 ? "[" : "", host, v6 ? "]" : "", port, PREFIX);
        if (!loopback(&sa))
            fprintf(stderr,
                    "pyunwind serve: warning: %s is not a loopback address: "
                    "whoever reaches it can read the targets' stacks\n",
                    host);
        fflush(stderr);
        /* every so often, the pages malloc holds free go back to the
         * system: the connections' and scrapes' memory comes and goes
         * in several threads' arenas, which otherwise keep what the
         * busiest minute left behind */
        int sig;
        struct timespec every = {TRIM_EVERY_S, 0};
        while ((sig = sigtimedwait(&stop, NULL, &every)) < 0)
            give_back_memory();
        fprintf(stderr, "pyunwind serve: %s: stopping (the targets run on)\n",
                sig == SIGTERM ? "SIGTERM" : "SIGINT");
        /* the scrapes under way end with what they have and their
         * connections are resumed; then the daemon stops */
        MHD_quiesce_daemon(d);
        pyu_scrapes_stop(srv.ss);
        usleep(200000); /* (their answers go out) */
        MHD_stop_daemon(d);
    }
    pyu_scrapes_free(srv.ss);
    pthread_mutex_destroy(&srv.mu);
    pthread_mutex_destroy(&srv.dump_mu);
    free(srv.known);
    free(srv.pids);
    return ex;
}
