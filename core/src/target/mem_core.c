/* Memory source: an ELF core file (kernel-written or gcore).
 *
 * PT_LOAD segments give the memory the core holds: [p_offset, p_filesz) of
 * the file backs [p_vaddr, p_vaddr + p_filesz); the rest of p_memsz is
 * memory the writer left out (the default coredump_filter drops unmodified
 * file-backed pages).  The NT_FILE note says which file backs which range,
 * so those pages are read from the file on disk (below --sysroot, or the
 * --exe replacement for the executable).  Reads may cross segments.
 */
#include "../internal.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif
#define CORE_MAX_SEGMENTS 65536
#define CORE_MAX_FILES 65536
#define CORE_MAX_NOTES (64u << 20)

typedef struct core_seg {
    uint64_t vaddr, memsz, filesz, offset;
    unsigned prot;
} core_seg;

typedef struct core_file {
    uint64_t start, end, pgoff;
    char *path; /* owned; as the core names it */
    int fd;     /* -1: not opened yet, -2: could not be opened */
} core_file;

typedef struct core_ctx {
    int fd;
    uint64_t size;
    Elf *elf;
    core_seg *segs; /* owned, sorted by vaddr */
    size_t nsegs;
    core_file *files; /* owned, in note order (ascending) */
    size_t nfiles;
    uint64_t page_size;
    char *exe_path;     /* owned: the executable as the core names it */
    char *exe_override; /* owned, or NULL */
    char *sysroot;      /* owned, or NULL */
    uint64_t entry;     /* AT_ENTRY */
    int signal;         /* pr_cursig of the first NT_PRSTATUS: the thread
                           that was dumping (0 for most gcore cores) */
    uint64_t signal_tid;
    bool have_prstatus;
    uint64_t truncated_want; /* file size the segments need, if larger */
    int64_t written;         /* the core file's mtime (seconds) */
    pyu_dwfl *dwfl;          /* native stacks, made on first need */
    char dwfl_error[512];    /* why it could not be made, or "" */
} core_ctx;

/* ------------------------------------------------------------- file side */

static int core_resolve(core_ctx *c, const char *mapped, char *out,
                        size_t outlen)
{
    int n;
    if (c->exe_override && c->exe_path && strcmp(mapped, c->exe_path) == 0)
        n = snprintf(out, outlen, "%s", c->exe_override);
    else if (c->sysroot)
        n = snprintf(out, outlen, "%s%s", c->sysroot, mapped);
    else
        n = snprintf(out, outlen, "%s", mapped);
    return (n > 0 && (size_t)n < outlen) ? 0 : -PYU_E_INVAL;
}

static int core_file_path(void *ctx, const char *mapped, char *out,
                          size_t outlen)
{
    return core_resolve(ctx, mapped, out, outlen);
}

static const core_file *file_at(const core_ctx *c, uint64_t addr)
{
    size_t lo = 0, hi = c->nfiles;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->files[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < c->nfiles && c->files[lo].start <= addr &&
        addr < c->files[lo].end)
        return &c->files[lo];
    return NULL;
}

/* Reads from the file that backs addr; returns bytes read (> 0) or < 0. */
static ssize_t read_backing(core_ctx *c, uint64_t addr, void *buf, size_t len)
{
    core_file *f = (core_file *)file_at(c, addr);
    if (!f)
        return -PYU_E_FAULT;
    if (f->fd == -1) {
        char path[PATH_MAX];
        f->fd = -2;
        if (core_resolve(c, f->path, path, sizeof path) == 0) {
            int fd = pyu_open_regular(path);
            if (fd >= 0)
                f->fd = fd;
        }
    }
    if (f->fd < 0)
        return -PYU_E_FAULT;
    uint64_t avail = f->end - addr;
    if (len > avail)
        len = (size_t)avail;
    uint64_t off = f->pgoff * c->page_size + (addr - f->start);
    if (off > (uint64_t)INT64_MAX)
        return -PYU_E_FAULT;
    ssize_t k = pread(f->fd, buf, len, (off_t)off);
    return k > 0 ? k : -PYU_E_FAULT;
}

/* ----------------------------------------------------------------- reads */

static const core_seg *seg_at(const core_ctx *c, uint64_t addr)
{
    size_t lo = 0, hi = c->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->segs[mid].vaddr + c->segs[mid].memsz <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < c->nsegs && c->segs[lo].vaddr <= addr &&
        addr - c->segs[lo].vaddr < c->segs[lo].memsz)
        return &c->segs[lo];
    return NULL;
}

static int read_one(core_ctx *c, uint64_t addr, char *buf, size_t len)
{
    while (len > 0) {
        const core_seg *s = seg_at(c, addr);
        ssize_t k = -PYU_E_FAULT;
        if (s) {
            uint64_t rel = addr - s->vaddr;
            size_t n = len;
            if (n > s->memsz - rel)
                n = (size_t)(s->memsz - rel);
            if (rel < s->filesz && s->offset + rel < c->size) {
                uint64_t in_core = s->filesz - rel;
                if (in_core > c->size - (s->offset + rel)) /* truncated */
                    in_core = c->size - (s->offset + rel);
                if (n > in_core)
                    n = (size_t)in_core;
                k = pread(c->fd, buf, n, (off_t)(s->offset + rel));
                if (k <= 0)
                    k = -PYU_E_IO;
            } else {
                /* left out of the core (or cut off): the file behind it */
                k = read_backing(c, addr, buf, n);
            }
        } else {
            k = read_backing(c, addr, buf, len);
        }
        if (k <= 0)
            return k < 0 ? (int)k : -PYU_E_FAULT;
        addr += (uint64_t)k;
        buf += k;
        len -= (size_t)k;
    }
    return 0;
}

static int core_read(void *ctx, const pyu_range *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i].addr + r[i].len < r[i].addr)
            return -PYU_E_FAULT;
        int rc = read_one(ctx, r[i].addr, r[i].buf, r[i].len);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int core_mappings(void *ctx, pyu_mapping_fn fn, void *arg)
{
    core_ctx *c = ctx;
    for (size_t i = 0; i < c->nsegs; i++) {
        const core_seg *s = &c->segs[i];
        const core_file *f = file_at(c, s->vaddr);
        pyu_mapping m = {s->vaddr, s->vaddr + s->memsz, 0, s->prot, NULL};
        if (f) {
            m.path = f->path;
            m.offset = f->pgoff * c->page_size + (s->vaddr - f->start);
        }
        int rc = fn(arg, &m);
        if (rc)
            return rc;
    }
    /* file mappings the core has no segment for at all */
    for (size_t i = 0; i < c->nfiles; i++) {
        const core_file *f = &c->files[i];
        if (seg_at(c, f->start))
            continue;
        pyu_mapping m = {f->start, f->end, f->pgoff * c->page_size,
                         PYU_PROT_READ, f->path};
        int rc = fn(arg, &m);
        if (rc)
            return rc;
    }
    return 0;
}

static void core_destroy(void *ctx)
{
    core_ctx *c = ctx;
    if (!c)
        return;
    for (size_t i = 0; i < c->nfiles; i++) {
        if (c->files[i].fd >= 0)
            close(c->files[i].fd);
        free(c->files[i].path);
    }
    free(c->files);
    free(c->segs);
    pyu_dwfl_free(c->dwfl);
    if (c->elf)
        elf_end(c->elf);
    if (c->fd >= 0)
        close(c->fd);
    free(c->exe_path);
    free(c->exe_override);
    free(c->sysroot);
    free(c);
}

static int core_fatal_signal(void *ctx, int *signo, uint64_t *tid)
{
    core_ctx *c = ctx;
    if (!c->signal)
        return -PYU_E_STATE;
    *signo = c->signal;
    *tid = c->signal_tid;
    return 0;
}

static int core_native_frames(void *ctx, uint64_t tid, pyu_native_fn fn,
                              void *arg, char *why, size_t whylen)
{
    core_ctx *c = ctx;
    if (!c->dwfl && !c->dwfl_error[0]) {
        pyu_err err = {0};
        if (pyu_dwfl_core(c->fd, c->exe_path, c->exe_override, c->sysroot,
                          &c->dwfl, &err) < 0)
            snprintf(c->dwfl_error, sizeof c->dwfl_error, "%s",
                     pyu_err_text(&err));
    }
    if (!c->dwfl) {
        snprintf(why, whylen, "%s", c->dwfl_error);
        return -PYU_E_IO;
    }
    pyu_err err = {0};
    int rc = pyu_dwfl_frames(c->dwfl, (int)tid, fn, arg, &err);
    if (rc < 0)
        snprintf(why, whylen, "%s", pyu_err_text(&err));
    return rc;
}

static int core_source_time(void *ctx, int64_t *sec, int *core)
{
    const core_ctx *c = ctx;
    *sec = c->written;
    *core = 1;
    return c->written > 0 ? 0 : -PYU_E_STATE;
}

const pyu_memory_ops pyu_core_ops = {
    .read = core_read,
    .mappings = core_mappings,
    .file_path = core_file_path,
    .fatal_signal = core_fatal_signal,
    .destroy = core_destroy,
    .native_frames = core_native_frames,
    .source_time = core_source_time,
};

/* ----------------------------------------------------------------- notes */

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int parse_nt_file(core_ctx *c, const uint8_t *d, size_t len)
{
    if (len < 16)
        return -PYU_E_BADCORE;
    uint64_t count = get64(d), page = get64(d + 8);
    if (count > CORE_MAX_FILES || count * 24 > len - 16 || page == 0 ||
        (page & (page - 1)) || page > (1u << 30))
        return -PYU_E_BADCORE;
    c->files = calloc(count ? count : 1, sizeof *c->files);
    if (!c->files)
        return -PYU_E_NOMEM;
    c->page_size = page;
    const char *names = (const char *)d + 16 + count * 24;
    size_t left = len - 16 - count * 24;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *e = d + 16 + i * 24;
        size_t nl = strnlen(names, left);
        if (nl == left)
            return -PYU_E_BADCORE;
        core_file *f = &c->files[c->nfiles];
        f->start = get64(e);
        f->end = get64(e + 8);
        f->pgoff = get64(e + 16);
        f->fd = -1;
        if (f->end <= f->start || f->pgoff > UINT64_MAX / page) {
            names += nl + 1;
            left -= nl + 1;
            continue;
        }
        f->path = strndup(names, nl);
        if (!f->path)
            return -PYU_E_NOMEM;
        c->nfiles++;
        names += nl + 1;
        left -= nl + 1;
    }
    /* the kernel writes them ascending; keep only an ordered, disjoint set */
    size_t w = 0;
    for (size_t i = 0; i < c->nfiles; i++) {
        if (w > 0 && c->files[i].start < c->files[w - 1].end) {
            free(c->files[i].path);
            continue;
        }
        c->files[w++] = c->files[i];
    }
    c->nfiles = w;
    return 0;
}

static void parse_auxv(core_ctx *c, const uint8_t *d, size_t len)
{
    for (size_t i = 0; i + 16 <= len; i += 16) {
        uint64_t type = get64(d + i), val = get64(d + i + 8);
        if (type == 9 /* AT_ENTRY */)
            c->entry = val;
        if (type == 0)
            break;
    }
}

static int parse_notes(core_ctx *c, int *pid)
{
    size_t nph;
    if (elf_getphdrnum(c->elf, &nph) != 0)
        return -PYU_E_BADCORE;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(c->elf, (int)i, &ph) || ph.p_type != PT_NOTE)
            continue;
        if (ph.p_filesz > CORE_MAX_NOTES || ph.p_offset > c->size ||
            ph.p_filesz > c->size - ph.p_offset)
            continue; /* cut off: use what other notes there are */
        Elf_Data *data =
            elf_getdata_rawchunk(c->elf, (int64_t)ph.p_offset,
                                 (size_t)ph.p_filesz, ELF_T_NHDR);
        if (!data)
            continue;
        size_t off = 0, name_off, desc_off;
        GElf_Nhdr nh;
        while (off < data->d_size &&
               (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) >
                   0) {
            const uint8_t *desc = (const uint8_t *)data->d_buf + desc_off;
            size_t dlen = nh.n_descsz;
            if (desc_off > data->d_size || dlen > data->d_size - desc_off)
                break;
            const char *name = (const char *)data->d_buf + name_off;
            if (nh.n_namesz != 5 || memcmp(name, "CORE", 5) != 0)
                continue;
            if (nh.n_type == NT_FILE && !c->files) {
                int rc = parse_nt_file(c, desc, dlen);
                if (rc == -PYU_E_NOMEM)
                    return rc;
            } else if (nh.n_type == NT_PRPSINFO && dlen >= 28) {
                int32_t p;
                memcpy(&p, desc + 24, 4);
                if (p > 0)
                    *pid = p;
            } else if (nh.n_type == NT_PRSTATUS && dlen >= 36 &&
                       !c->have_prstatus) {
                /* the kernel writes the dumping thread first */
                int32_t p;
                int16_t sig;
                memcpy(&p, desc + 32, 4);
                memcpy(&sig, desc + 12, 2);
                c->have_prstatus = true;
                if (p > 0 && sig > 0 && sig < 128) {
                    c->signal = sig;
                    c->signal_tid = (uint64_t)p;
                }
                if (p > 0 && *pid == 0)
                    *pid = p;
            } else if (nh.n_type == NT_AUXV) {
                parse_auxv(c, desc, dlen);
            }
        }
    }
    if (!c->page_size)
        c->page_size = 4096;
    return 0;
}

static int cmp_seg(const void *a, const void *b)
{
    const core_seg *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

static int load_segments(core_ctx *c)
{
    size_t nph;
    if (elf_getphdrnum(c->elf, &nph) != 0)
        return -PYU_E_BADCORE;
    if (nph > CORE_MAX_SEGMENTS)
        nph = CORE_MAX_SEGMENTS;
    c->segs = calloc(nph ? nph : 1, sizeof *c->segs);
    if (!c->segs)
        return -PYU_E_NOMEM;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(c->elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
            ph.p_memsz == 0 || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
            continue;
        core_seg *s = &c->segs[c->nsegs++];
        s->vaddr = ph.p_vaddr;
        s->memsz = ph.p_memsz;
        s->filesz = ph.p_filesz < ph.p_memsz ? ph.p_filesz : ph.p_memsz;
        s->offset = ph.p_offset;
        s->prot = ((ph.p_flags & PF_R) ? PYU_PROT_READ : 0) |
                  ((ph.p_flags & PF_W) ? PYU_PROT_WRITE : 0) |
                  ((ph.p_flags & PF_X) ? PYU_PROT_EXEC : 0);
        if (s->filesz && (s->offset > c->size ||
                          s->filesz > c->size - s->offset)) {
            uint64_t want = s->offset + s->filesz;
            if (want > c->truncated_want)
                c->truncated_want = want;
        }
    }
    qsort(c->segs, c->nsegs, sizeof *c->segs, cmp_seg);
    /* overlapping segments would make lookups ambiguous: keep the first */
    size_t w = 0;
    for (size_t i = 0; i < c->nsegs; i++) {
        if (w > 0 && c->segs[i].vaddr <
                         c->segs[w - 1].vaddr + c->segs[w - 1].memsz)
            continue;
        c->segs[w++] = c->segs[i];
    }
    c->nsegs = w;
    return 0;
}

/* ------------------------------------------------------------------ open */

/* Reads len bytes at addr from the core itself (not the files behind it);
 * false when the core does not hold them all. */
static bool core_only(const core_ctx *c, uint64_t addr, void *buf,
                      size_t len)
{
    const core_seg *s = seg_at(c, addr);
    if (!s)
        return false;
    uint64_t rel = addr - s->vaddr;
    return rel < s->filesz && len <= s->filesz - rel &&
           s->offset + rel <= c->size && len <= c->size - s->offset - rel &&
           pread(c->fd, buf, len, (off_t)(s->offset + rel)) == (ssize_t)len;
}

/* The build-id of the ELF file mapped at start, from the process's memory
 * as the core holds it (the kernel keeps the first page of every ELF
 * mapping); its length, or 0. */
static size_t mapped_build_id(const core_ctx *c, uint64_t start, uint8_t *id)
{
    Elf64_Ehdr eh;
    Elf64_Phdr ph[64];
    if (!core_only(c, start, &eh, sizeof eh) ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_phentsize != sizeof *ph || eh.e_phnum == 0 || eh.e_phnum > 64 ||
        !core_only(c, start + eh.e_phoff, ph, eh.e_phnum * sizeof *ph))
        return 0;
    uint64_t base = UINT64_MAX;
    for (size_t i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0)
            base = ph[i].p_vaddr & ~(c->page_size - 1);
    if (base == UINT64_MAX)
        return 0;
    for (size_t i = 0; i < eh.e_phnum; i++) {
        uint8_t notes[4096];
        size_t n = ph[i].p_filesz < sizeof notes ? ph[i].p_filesz
                                                 : sizeof notes;
        size_t got;
        if (ph[i].p_type == PT_NOTE &&
            core_only(c, start - base + ph[i].p_vaddr, notes, n) &&
            (got = pyu_notes_build_id(notes, n, id)) > 0)
            return got;
    }
    return 0;
}

/* The executable and libpython on disk (as --exe and --sysroot resolve
 * them) must be the files the process ran, when both build-ids are known:
 * another build's frozen code objects and data would give wrong stacks. */
static int check_build_ids(core_ctx *c, const char *core, pyu_err *err)
{
    for (size_t i = 0; i < c->nfiles; i++) {
        const core_file *f = &c->files[i];
        const char *base = strrchr(f->path, '/');
        base = base ? base + 1 : f->path;
        if (f->pgoff != 0 ||
            !((c->exe_path && strcmp(f->path, c->exe_path) == 0) ||
              strncmp(base, "libpython", 9) == 0))
            continue;
        uint8_t mem[PYU_BUILD_ID_MAX];
        size_t mlen = mapped_build_id(c, f->start, mem);
        char path[PATH_MAX];
        pyu_elf_info info;
        pyu_err quiet = {0};
        if (!mlen || core_resolve(c, f->path, path, sizeof path) < 0 ||
            pyu_elf_inspect(path, &info, &quiet) < 0 || !info.build_id_len)
            continue;
        if (info.build_id_len == mlen &&
            memcmp(info.build_id, mem, mlen) == 0)
            continue;
        char want[2 * PYU_BUILD_ID_MAX + 1], have[2 * PYU_BUILD_ID_MAX + 1];
        pyu_build_id_hex(mem, mlen, want);
        pyu_build_id_hex(info.build_id, info.build_id_len, have);
        return pyu_err_set(err, PYU_E_BADCORE,
                           "%s: %s is not the file the process ran (%s): "
                           "its build-id is %s, the core's is %s; give the "
                           "right one with --exe FILE or --sysroot DIR",
                           core, path, f->path, have, want);
    }
    return 0;
}

int pyu_core_create(const char *path, const char *exe, const char *sysroot,
                    void **out, int *pid, pyu_err *err)
{
    struct stat st;
    int rc;
    core_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return pyu_err_set(err, PYU_E_NOMEM, "out of memory");
    /* (a FIFO or a device given as the core must not block the open) */
    c->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (c->fd < 0) {
        rc = pyu_err_set(err, errno == EACCES ? PYU_E_PERM : PYU_E_IO,
                         "cannot open core file %s: %s", path,
                         strerror(errno));
        goto fail;
    }
    if (fstat(c->fd, &st) < 0 || S_ISDIR(st.st_mode)) {
        rc = pyu_err_set(err, PYU_E_BADCORE,
                         "%s is a directory, not a core file", path);
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = pyu_err_set(err, PYU_E_BADCORE,
                         "%s is not a regular file, not a core file", path);
        goto fail;
    }
    c->written = (int64_t)st.st_mtime; /* (the file given, compressed or
                                          not) */
    int plain;
    if ((rc = pyu_core_decompress(c->fd, path, &plain, err)) < 0)
        goto fail;
    if (plain >= 0) { /* read the decompressed copy from here on */
        close(c->fd);
        c->fd = plain;
        if (fstat(c->fd, &st) < 0) {
            rc = pyu_err_set(err, PYU_E_IO, "%s: %s", path, strerror(errno));
            goto fail;
        }
    }
    c->size = (uint64_t)st.st_size;
    if (c->size == 0) {
        rc = pyu_err_set(err, PYU_E_BADCORE,
                         "%s is empty, not a core file", path);
        goto fail;
    }
    if (!pyu_elf_init()) {
        rc = pyu_err_set(err, PYU_E_IO, "libelf is unusable");
        goto fail;
    }
    c->elf = elf_begin(c->fd, ELF_C_READ_MMAP, NULL);
    if (!c->elf || elf_kind(c->elf) != ELF_K_ELF) {
        rc = pyu_err_set(err, PYU_E_BADCORE,
                         "%s is not an ELF file, so not a core file", path);
        goto fail;
    }
    GElf_Ehdr eh;
    if (!gelf_getehdr(c->elf, &eh)) {
        rc = pyu_err_set(err, PYU_E_BADCORE,
                         "%s: the ELF header is unreadable (%s)", path,
                         elf_errmsg(-1));
        goto fail;
    }
    if (eh.e_type != ET_CORE) {
        rc = pyu_err_set(err, PYU_E_BADCORE,
                         "%s is an ELF %s, not a core file (give the "
                         "interpreter with --exe and the core with --core)",
                         path,
                         eh.e_type == ET_EXEC  ? "executable"
                         : eh.e_type == ET_DYN ? "shared object or PIE"
                                               : "file");
        goto fail;
    }
    if (gelf_getclass(c->elf) != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB) {
        rc = pyu_err_set(err, PYU_E_BADCORE,
                         "%s is not a 64-bit little-endian core; pyunwind "
                         "reads 64-bit targets only", path);
        goto fail;
    }
    if ((rc = load_segments(c)) < 0 || (rc = parse_notes(c, pid)) < 0) {
        rc = pyu_err_set(err, -rc, "%s: %s", path,
                         rc == -PYU_E_NOMEM ? "out of memory"
                                            : "malformed program headers");
        goto fail;
    }
    if (c->nsegs == 0) {
        rc = pyu_err_set(err, PYU_E_BADCORE,
                         "%s has no memory segments (the core is cut off "
                         "or empty)", path);
        goto fail;
    }
    if (c->entry) {
        const core_file *f = file_at(c, c->entry);
        if (f && !(c->exe_path = strdup(f->path))) {
            rc = pyu_err_set(err, PYU_E_NOMEM, "out of memory");
            goto fail;
        }
    }
    if ((exe && !(c->exe_override = strdup(exe))) ||
        (sysroot && !(c->sysroot = strdup(sysroot)))) {
        rc = pyu_err_set(err, PYU_E_NOMEM, "out of memory");
        goto fail;
    }
    if (exe && !c->exe_path && c->nfiles > 0 &&
        !(c->exe_path = strdup(c->files[0].path))) {
        rc = pyu_err_set(err, PYU_E_NOMEM, "out of memory");
        goto fail;
    }
    if ((rc = check_build_ids(c, path, err)) < 0)
        goto fail;
    *out = c;
    return 0;
fail:
    core_destroy(c);
    return rc;
}

/* How large the core should be when it is cut off, else 0. */
uint64_t pyu_core_truncated(void *ctx, uint64_t *have)
{
    core_ctx *c = ctx;
    *have = c->size;
    return c->truncated_want;
}
