/* pyu_snapshot: records the memory pyunwind reads from a live CPython
 * process into a snapshot file, the seed the fuzz harnesses
 * (tests/fuzz/fuzz_*.c) mutate.
 *
 *   pyu_snapshot PID OUT [SAMPLES]
 *
 * The caller stops the process (SIGSTOP) first, so that the snapshot is
 * one state.  A session reads it through memory ops of this file
 * (process_vm_readv, the mappings of /proc/PID/maps, the runtime's
 * address from a first, ordinary session), which keep a copy of every
 * page read; it takes a dump (with async stacks), one with the frames'
 * variables (PYU_WALK_LOCALS: the objects they hold), the asyncio tasks
 * (3.14+) and SAMPLES samples (default 3; the anchor writes of 3.15 are
 * applied to the copies, not to the process).  The snapshot format is
 * tests/fuzz/snap.h's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <pyunwind/pyunwind.h>

#include "snap.h"

#define PAGE 4096u
#define MAX_PAGES 65536u

typedef struct page {
    uint64_t addr;
    uint8_t data[PAGE];
} page;

typedef struct rec {
    int pid;
    page *pages;
    size_t n;
    snap_map *maps;
    char (*paths)[512];
    size_t nmaps;
} rec;

static page *find(rec *c, uint64_t addr)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->pages[i].addr == addr)
            return &c->pages[i];
    return NULL;
}

/* The page at addr, read from the process the first time. */
static page *page_of(rec *c, uint64_t addr)
{
    page *p = find(c, addr);
    if (p || c->n >= MAX_PAGES)
        return p;
    p = &c->pages[c->n];
    struct iovec loc = {p->data, PAGE}, rem = {(void *)(uintptr_t)addr, PAGE};
    if (process_vm_readv(c->pid, &loc, 1, &rem, 1, 0) != (ssize_t)PAGE)
        return NULL;
    p->addr = addr;
    c->n++;
    return p;
}

static int rec_read(void *ctx, const pyu_range *r, size_t n)
{
    rec *c = ctx;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t *out = r[i].buf;
        for (uint64_t a = r[i].addr; a < r[i].addr + r[i].len;) {
            uint64_t base = a & ~(uint64_t)(PAGE - 1);
            size_t off = (size_t)(a - base);
            size_t len = PAGE - off;
            if (len > r[i].addr + r[i].len - a)
                len = (size_t)(r[i].addr + r[i].len - a);
            page *p = page_of(c, base);
            if (!p) {
                rc = -PYU_E_FAULT; /* (the other ranges are still read) */
                break;
            }
            memcpy(out + (a - r[i].addr), p->data + off, len);
            a += len;
        }
    }
    return rc;
}

static int rec_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
    rec *c = ctx;
    const uint8_t *in = buf;
    for (size_t k = 0; k < len; k++) {
        page *p = page_of(c, (addr + k) & ~(uint64_t)(PAGE - 1));
        if (!p)
            return -PYU_E_FAULT;
        p->data[(addr + k) % PAGE] = in[k];
    }
    return 0;
}

static int rec_mappings(void *ctx, pyu_mapping_fn fn, void *arg)
{
    rec *c = ctx;
    for (size_t i = 0; i < c->nmaps; i++) {
        pyu_mapping m = {c->maps[i].start, c->maps[i].end, c->maps[i].offset,
                         c->maps[i].prot,
                         c->paths[i][0] ? c->paths[i] : NULL};
        int rc = fn(arg, &m);
        if (rc)
            return rc;
    }
    return 0;
}

static const pyu_memory_ops rec_ops = {
    .read = rec_read, .mappings = rec_mappings, .write = rec_write};

static int load_maps(rec *c)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/maps", c->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long s, e, off;
        char perms[8], file[512] = "";
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %511[^\n]", &s, &e, perms,
                   &off, file) < 4)
            continue;
        if (c->nmaps == cap) {
            cap = cap ? cap * 2 : 64;
            c->maps = realloc(c->maps, cap * sizeof *c->maps);
            c->paths = realloc(c->paths, cap * sizeof *c->paths);
            if (!c->maps || !c->paths)
                return -1;
        }
        unsigned prot = (perms[0] == 'r' ? PYU_PROT_READ : 0) |
                        (perms[1] == 'w' ? PYU_PROT_WRITE : 0) |
                        (perms[2] == 'x' ? PYU_PROT_EXEC : 0);
        c->maps[c->nmaps] = (snap_map){s, e, off, prot, 0};
        snprintf(c->paths[c->nmaps], sizeof c->paths[0], "%s",
                 file[0] == '/' ? file : "");
        c->maps[c->nmaps].pathlen = (uint32_t)strlen(c->paths[c->nmaps]);
        c->nmaps++;
    }
    fclose(f);
    return 0;
}

static int by_addr(const void *a, const void *b)
{
    uint64_t x = ((const page *)a)->addr, y = ((const page *)b)->addr;
    return x < y ? -1 : x > y;
}

static void put(FILE *f, const void *p, size_t n) { fwrite(p, 1, n, f); }

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: pyu_snapshot PID OUT [SAMPLES]\n");
        return 2;
    }
    rec c = {.pid = atoi(argv[1])};
    int samples = argc > 3 ? atoi(argv[3]) : 3;
    c.pages = calloc(MAX_PAGES, sizeof *c.pages);
    pyu_session *s0 = pyu_session_new(), *s = pyu_session_new();
    pyu_python_info py;
    pyu_process pr;
    if (!c.pages || load_maps(&c) < 0 ||
        pyu_open_pid(s0, c.pid, PYU_OPEN_NONBLOCKING) < 0 ||
        pyu_python(s0, &py) < 0 || pyu_target(s0, &pr) < 0) {
        fprintf(stderr, "pyu_snapshot: %s\n", pyu_errmsg(s0));
        return 1;
    }
    if (pyu_open_memory(s, &rec_ops, &c, c.pid, py.runtime_addr) < 0) {
        fprintf(stderr, "pyu_snapshot: %s\n", pyu_errmsg(s));
        return 1;
    }
    pyu_dump *d = NULL;
    pyu_dump_take(s, py.version_hex >= 0x030e0000 ? PYU_WALK_ASYNC : 0, &d);
    pyu_dump_free(d);
    d = NULL; /* and the frames' variables, with the objects they hold */
    pyu_dump_take(s, PYU_WALK_LOCALS, &d);
    snap_lookups(s, d); /* (and what py-print reads) */
    pyu_dump_free(d);
    pyu_tasks *t = NULL;
    pyu_tasks_take(s, &t);
    pyu_tasks_free(t);
    pyu_profile *p = pyu_profile_new();
    pyu_sampler *sm = NULL;
    pyu_sampler_opts so = {PYU_MODE_WALL, PYU_SAMPLE_GC | PYU_SAMPLE_NATIVE,
                           0};
    if (p && pyu_sampler_new(s, &so, p, &sm) == 0)
        for (int i = 0; i < samples; i++)
            pyu_sampler_take(sm);
    pyu_sampler_free(sm);
    pyu_profile_free(p);
    qsort(c.pages, c.n, sizeof *c.pages, by_addr);
    FILE *f = fopen(argv[2], "wb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    snap_header h = {SNAP_MAGIC, (uint32_t)c.pid, 0, py.runtime_addr,
                     (uint32_t)c.nmaps};
    put(f, &h, sizeof h);
    for (size_t i = 0; i < c.nmaps; i++) {
        put(f, &c.maps[i], sizeof c.maps[i]);
        put(f, c.paths[i], c.maps[i].pathlen);
    }
    /* runs of consecutive pages as one range each */
    uint32_t nranges = 0;
    for (size_t i = 0; i < c.n; i++)
        nranges += i == 0 || c.pages[i].addr != c.pages[i - 1].addr + PAGE;
    put(f, &nranges, sizeof nranges);
    for (size_t i = 0; i < c.n;) {
        size_t j = i + 1;
        while (j < c.n && c.pages[j].addr == c.pages[j - 1].addr + PAGE)
            j++;
        snap_range r = {c.pages[i].addr, (uint32_t)((j - i) * PAGE)};
        put(f, &r, sizeof r);
        for (size_t k = i; k < j; k++)
            put(f, c.pages[k].data, PAGE);
        i = j;
    }
    if (fclose(f) != 0) {
        perror(argv[2]);
        return 1;
    }
    printf("%s: %zu pages in %u ranges, %zu mappings, CPython %s\n",
           argv[2], c.n, nranges, c.nmaps, pr.python);
    pyu_session_free(s);
    pyu_session_free(s0);
    return 0;
}
