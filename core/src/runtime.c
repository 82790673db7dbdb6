/* Finding _PyRuntime in the target.
 *
 * 1. The .PyRuntime section of each mapped file (python executable or
 *    libpython first): section headers come from the file on disk, the load
 *    bias from the mapping of its first page.
 * 2. The _PyRuntime dynamic symbol of the same files.
 * 3. A scan of writable memory for the cookie (binaries gone).
 * A candidate counts only when it starts with the cookie; an initialised
 * runtime (non-NULL interpreter list) wins over an uninitialised copy, such
 * as a libpython that ctypes mapped a second time.
 */
#include "internal.h"

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

/* Checks one candidate address.  Returns 1 when it holds a runtime
 * (recorded in *best unless a better one is there), 0 when not, < 0 on a
 * fatal error (message set). */
static int try_candidate(pyu_session *s, uint64_t addr, const char *where,
                         found *best, pyu_err *version_err)
{
    char head[8];
    if (!addr || (addr & 7) || pyu_read_quiet(s, addr, head, 8) < 0 ||
        memcmp(head, cookie, 8) != 0)
        return 0;
    if (best->addr == addr)
        return 1;
    pyu_offsets off;
    int rc = pyu_offsets_read(s, addr, &off);
    if (rc < 0) {
        if (version_err->code == PYU_E_OK) {
            *version_err = s->err;
            if (where && *where)
                pyu_err_ctx(version_err, "%s", where);
        }
        return 0;
    }
    uint64_t head_ptr = 0;
    bool init = pyu_read_quiet(s, addr + PYU_OFF(&off, rt_interpreters_head),
                               &head_ptr, 8) == 0 &&
                head_ptr != 0;
    if (best->addr && (best->initialised || !init))
        return 1;
    free(best->where);
    best->addr = addr;
    best->where = strdup(where ? where : "");
    best->initialised = init;
    best->off = off;
    return 1;
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
                for (size_t k = 0; k + 8 <= n; k += 8)
                    if (memcmp(buf + k, cookie, 8) == 0)
                        try_candidate(s, a + k, "a scan of writable memory",
                                      best, verr);
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
            if (minor < 13)
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
        try_candidate(s, hint, "", &best, &verr);
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
                if (pass == 0 && info->has_pyruntime)
                    try_candidate(s, bias + info->pyruntime_vaddr,
                                  g.files[i].path, &best, &verr);
                if (pass == 1 && info->has_symbol)
                    try_candidate(s, bias + info->symbol_vaddr,
                                  g.files[i].path, &best, &verr);
            }
        }
        if (!best.addr)
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
                                 "no CPython 3.13+ runtime found: %s; "
                                 "pyunwind reads CPython 3.13, 3.14 and 3.15",
                                 old);
            else
                rc = pyu_err_set(&s->err, PYU_E_NOTPY,
                                 "no CPython runtime found (no .PyRuntime "
                                 "section, _PyRuntime symbol or debug "
                                 "offsets cookie): not a CPython 3.13+ "
                                 "program%s",
                                 s->ops->mappings ? "" : " at the given address");
        }
        goto out;
    }
    if (!best.initialised) {
        rc = pyu_err_set(&s->err, PYU_E_STATE,
                         "the CPython runtime at 0x%" PRIx64
                         " (in %s) is not initialised yet (no interpreter)",
                         best.addr, best.where ? best.where : "?");
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
