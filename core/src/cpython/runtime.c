/* Finding _PyRuntime in the target.
 *
 * 1. The .PyRuntime section of each mapped file (python executable or
 *    libpython first): section headers come from the file on disk, the load
 *    bias from the mapping of its first page.
 * 2. The _PyRuntime dynamic symbol of the same files.
 * 3. A scan of writable memory for the cookie (binaries gone).
 * A 3.13+ candidate counts only when it starts with the cookie.  CPython
 * 3.11 has no debug offsets: its candidates come from a file whose
 * Py_Version says 3.11 (or, in the scan, from the runtime's own shape),
 * and count only when consistent: the first interpreter points back at
 * the runtime and every thread of it names that interpreter.  An
 * initialised runtime (non-NULL interpreter list) wins over an
 * uninitialised copy, such as a libpython that ctypes mapped a second
 * time.
 */
#include "../internal.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_CHUNK (1u << 20)
#define SCAN_BUDGET (1ull << 30)
#define SCAN_MAX_MAPPING (256ull << 20)

static const char cookie[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};

typedef struct found {
    uint64_t addr;
    char *where;   /* owned */
    bool initialised;
    pyu_offsets off;
} found;

#define CONSISTENT_THREADS 256 /* threads checked in a 3.11 candidate */

/* A runtime without debug offsets: is it consistent?  Sets *init when it
 * has an interpreter. */
static bool consistent(pyu_session *s, uint64_t addr, const pyu_offsets *o,
                       bool *init)
{
    uint64_t head = 0, back = 0, ts = 0;
    *init = false;
    if (pyu_read_quiet(s, addr + PYU_OFF(o, rt_interpreters_head), &head,
                       8) < 0)
        return false;
    if (!head)
        return true;
    pyu_range r[2] = {
        {head + PYU_OFF(o, is_runtime), &back, 8},
        {head + PYU_OFF(o, is_threads_head), &ts, 8},
    };
    if (pyu_readv_quiet(s, r, 2) < 0 || back != addr)
        return false;
    cycle cyc = {0, 1, 0};
    for (int n = 0; ts && n < CONSISTENT_THREADS; n++) {
        uint64_t interp = 0, next = 0;
        pyu_range t[2] = {
            {ts + PYU_OFF(o, ts_interp), &interp, 8},
            {ts + PYU_OFF(o, ts_next), &next, 8},
        };
        if (cycle_step(&cyc, ts) || pyu_readv_quiet(s, t, 2) < 0 ||
            interp != head)
            return false;
        ts = next;
    }
    *init = true;
    return true;
}

/* Checks one candidate address; py_version: the Py_Version of the file
 * that names it when that is a version without debug offsets, else 0.
 * Returns 1 when it holds a runtime (recorded in *best unless a better
 * one is there), 0 when not. */
static int try_candidate(pyu_session *s, uint64_t addr, const char *where,
                         found *best, pyu_err *version_err,
                         uint64_t py_version)
{
    char head[8];
    if (!addr || (addr & 7) || pyu_read_quiet(s, addr, head, 8) < 0)
        return 0;
    bool cookied = memcmp(head, cookie, 8) == 0;
    if (!cookied && !py_version)
        return 0;
    if (best->addr == addr)
        return 1;
    pyu_offsets off;
    int rc = cookied ? pyu_offsets_read(s, addr, &off)
                     : pyu_offsets_builtin(s, py_version, &off);
    if (rc < 0) {
        if (version_err->code == PYU_E_OK) {
            *version_err = s->err;
            if (where && *where)
                pyu_err_ctx(version_err, "%s", where);
        }
        return 0;
    }
    uint64_t head_ptr = 0;
    bool init;
    if (cookied)
        init = pyu_read_quiet(s, addr + PYU_OFF(&off, rt_interpreters_head),
                              &head_ptr, 8) == 0 &&
               head_ptr != 0;
    else if (!consistent(s, addr, &off, &init))
        return 0;
    if (best->addr && (best->initialised || !init))
        return 1;
    free(best->where);
    best->addr = addr;
    best->where = strdup(where ? where : "");
    best->initialised = init;
    best->off = off;
    return 1;
}

/* The Py_Version of a file worth trying without a cookie: one older than
 * the debug offsets (3.13), else 0. */
static uint64_t legacy(uint64_t hex)
{
    return (hex >> 24) == 3 && ((hex >> 16) & 0xff) < 13 ? hex : 0;
}

static uint64_t legacy_version(const pyu_elf_info *info)
{
    return info->has_py_version ? legacy(info->py_version) : 0;
}

static void scan_writable(pyu_session *s, const pyu_mapped *g, found *best,
                          pyu_err *verr)
{
    uint64_t budget = SCAN_BUDGET;
    char *buf = malloc(SCAN_CHUNK);
    if (!buf)
        return;
    for (size_t i = 0; i < g->nwritable && !best->initialised; i++) {
        uint64_t a = g->writable[i].start, end = g->writable[i].end;
        if (end - a > SCAN_MAX_MAPPING)
            continue;
        while (a < end && budget > 0 && !best->initialised) {
            size_t n = end - a < SCAN_CHUNK ? (size_t)(end - a) : SCAN_CHUNK;
            budget = budget > n ? budget - n : 0;
            if (pyu_read_quiet(s, a, buf, n) == 0) {
                for (size_t k = 0; k + 8 <= n; k += 8) {
                    uint64_t legacy = pyu_builtin_runtime_at(
                        (const uint8_t *)buf, n, k, a + k);
                    /* (the caller may know the micro version) */
                    if (legacy && ((s->version_hint >> 16) & 0xffff) ==
                                      ((legacy >> 16) & 0xffff))
                        legacy = s->version_hint;
                    if (legacy || memcmp(buf + k, cookie, 8) == 0)
                        try_candidate(s, a + k, "a scan of writable memory",
                                      best, verr, legacy);
                }
            }
            a += n;
        }
    }
    free(buf);
}

/* For the error message when no runtime is there: Py_Version of an older
 * CPython, when one is mapped. */
static void describe_old_python(const pyu_mapped *g, char *out,
                                size_t outlen)
{
    out[0] = '\0';
    for (size_t i = 0; i < g->nfiles; i++) {
        const char *base = strrchr(g->files[i].path, '/');
        base = base ? base + 1 : g->files[i].path;
        int major, minor;
        if (sscanf(base, "libpython%d.%d", &major, &minor) == 2 ||
            sscanf(base, "python%d.%d", &major, &minor) == 2) {
            snprintf(out, outlen, "it runs CPython %d.%d (%s)", major, minor,
                     g->files[i].path);
            if (minor < 9)
                return;
        }
    }
}

int pyu_runtime_find(pyu_session *s, uint64_t hint)
{
    pyu_mapped g = {0};
    found best = {0};
    pyu_err verr = {0};
    int rc = 0;

    if (hint)
        try_candidate(s, hint, "", &best, &verr, legacy(s->version_hint));
    if (!best.initialised && s->ops->mappings) {
        if ((rc = pyu_mapped_scan(s, NULL, &g)) < 0)
            goto out;
        /* the .PyRuntime section of each file (python ones first), then
         * their _PyRuntime symbol */
        for (int pass = 0; pass < 2 && !best.initialised; pass++) {
            for (size_t i = 0; i < g.nfiles && !best.initialised; i++) {
                const pyu_elf_info *info = pyu_mapped_inspect(s, &g.files[i]);
                if (!info)
                    continue;
                uint64_t bias = g.files[i].base - info->base_vaddr;
                uint64_t legacy = legacy_version(info);
                if (pass == 0 && info->has_pyruntime)
                    try_candidate(s, bias + info->pyruntime_vaddr,
                                  g.files[i].path, &best, &verr, legacy);
                if (pass == 1 && info->has_symbol)
                    try_candidate(s, bias + info->symbol_vaddr,
                                  g.files[i].path, &best, &verr, legacy);
            }
        }
        /* (a file that named a version not read is believed: a scan
         * would find its runtime by shape) */
        if (!best.addr && verr.code == PYU_E_OK)
            scan_writable(s, &g, &best, &verr);
    }
    if (!best.addr) {
        if (verr.code != PYU_E_OK) {
            s->err = verr;
            rc = -verr.code;
        } else {
            char old[PATH_MAX + 64];
            describe_old_python(&g, old, sizeof old);
            if (old[0])
                rc = pyu_err_set(&s->err, PYU_E_VERSION,
                                 "no CPython runtime pyunwind can read "
                                 "found: %s; pyunwind reads "
                                 PYU_VERSIONS_READ,
                                 old);
            else
                rc = pyu_err_set(&s->err, PYU_E_NOTPY,
                                 "no CPython runtime found (no .PyRuntime "
                                 "section, _PyRuntime symbol or debug "
                                 "offsets cookie): not a CPython 3.9+ "
                                 "program%s",
                                 s->ops->mappings ? "" : " at the given address");
        }
        goto out;
    }
    if (!best.initialised) {
        rc = pyu_err_set(&s->err, PYU_E_STATE,
                         "the CPython runtime at 0x%" PRIx64
                         " (in %s) is not initialised yet (no interpreter)",
                         best.addr, best.where && best.where[0] ? best.where : "?");
        goto out;
    }
    s->runtime = best.addr;
    s->off = best.off;
    pyu_version_string(best.off.version_hex, s->version, sizeof s->version);
    free(s->found_in);
    s->found_in = best.where;
    best.where = NULL;
    rc = 0;
out:
    pyu_mapped_free(&g);
    free(best.where);
    return rc;
}
