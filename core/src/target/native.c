/* Native stacks with elfutils' libdwfl: a live process whose threads the
 * caller holds stopped with ptrace, or an ELF core file.
 *
 * libdwfl reports the mapped files (/proc/PID/maps; the core's NT_FILE
 * note), finds each file's ELF when it first needs it (through
 * find_elf below: the target's root or --sysroot/--exe first), unwinds
 * with the CFI of .eh_frame (so stripped binaries unwind), and names
 * functions from .symtab or .dynsym, or from separate debug files found
 * by build-id when they are installed.  Registers come from ptrace
 * (PTRACE_GETREGS) or from the core's NT_PRSTATUS notes.
 */
#include "../internal.h"

#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define X86_64_RSP 7 /* DWARF register number of rsp */

struct pyu_dwfl {
    Dwfl *dwfl;
    Elf *core;        /* the core's ELF handle (cores), or NULL */
    int pid;          /* live process, or 0 */
    char *root;       /* owned: prefix for the files the target names
                         ("/proc/PID/root", --sysroot), or NULL */
    char *exe_path;   /* owned: the executable as the core names it */
    char *exe_override; /* owned: --exe, or NULL */
};

/* find_elf gets no pointer of ours: the handle in use, set around every
 * call into libdwfl (one thread uses a handle at a time). */
static __thread const pyu_dwfl *current;

/* Opens the file the target names as `name`, where the caller's options
 * say it is; -1 when it cannot be opened. */
static int open_named(const pyu_dwfl *d, const char *name, char **file_name)
{
    char path[4096];
    int fd = -1;
    if (!d || !name || name[0] != '/')
        return -1;
    if (d->exe_override && d->exe_path && strcmp(name, d->exe_path) == 0)
        snprintf(path, sizeof path, "%s", d->exe_override);
    else if (d->root)
        snprintf(path, sizeof path, "%s%s", d->root, name);
    else
        snprintf(path, sizeof path, "%s", name);
    fd = pyu_open_regular(path);
    if (fd >= 0 && !(*file_name = strdup(path))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
                    Dwarf_Addr base, char **file_name, Elf **elfp)
{
    int fd = open_named(current, modname, file_name);
    if (fd >= 0)
        return fd;
    if (current && current->pid)
        return dwfl_linux_proc_find_elf(mod, userdata, modname, base,
                                        file_name, elfp);
    return dwfl_build_id_find_elf(mod, userdata, modname, base, file_name,
                                  elfp);
}

static char *debuginfo_path;

static const Dwfl_Callbacks callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

void pyu_dwfl_free(pyu_dwfl *d)
{
    if (!d)
        return;
    current = d;
    if (d->dwfl)
        dwfl_end(d->dwfl);
    current = NULL;
    if (d->core)
        elf_end(d->core);
    free(d->root);
    free(d->exe_path);
    free(d->exe_override);
    free(d);
}

static int fail(pyu_dwfl *d, pyu_err *err, const char *what)
{
    int e = dwfl_errno();
    pyu_err_set(err, PYU_E_IO, "native stacks: %s: %s", what,
                 e ? dwfl_errmsg(e) : "failed");
    pyu_dwfl_free(d);
    return -PYU_E_IO;
}

static pyu_dwfl *make(const char *root, pyu_err *err)
{
    pyu_dwfl *d = calloc(1, sizeof *d);
    if (!d || (root && !(d->root = strdup(root)))) {
        free(d);
        pyu_err_set(err, PYU_E_NOMEM, "out of memory");
        return NULL;
    }
    current = d;
    if (!(d->dwfl = dwfl_begin(&callbacks))) {
        current = NULL;
        fail(d, err, "starting libdwfl");
        return NULL;
    }
    return d;
}

/* The files a live process maps, as libdwfl's dwfl_linux_proc_report
 * reports them (a module per run of one file's mappings, the vdso by
 * the name dwfl_linux_proc_find_elf reads from memory), but a module
 * starts only at its file's offset 0.  libdwfl starts one at the first
 * mapping of a file and takes its load address from there; libffi 3.4+
 * maps a page of its own file (its closure trampolines, file offset
 * 0xd000 in Debian's libffi 8.5) just below the library, which then
 * put every libffi address at the wrong offset in the file: the CFI of
 * another function unwound the frames of a ctypes callback to a return
 * address in some other library, and the stack ended there.  gdb takes
 * load addresses from the dynamic linker's list, as libdwfl does for a
 * core.  A mapping of a file that starts no module and continues none
 * (that trampoline page) is left out: a pc there is in no module, as
 * in an anonymous mapping. */
static int report_maps(Dwfl *dwfl, int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char *line = NULL, *file = NULL;
    size_t cap = 0;
    unsigned long long low = 0, high = 0, ino = 0;
    unsigned dmaj = 0, dmin = 0;
    bool ok = true;
    while (ok && getline(&line, &cap, f) > 0) {
        unsigned long long start, end, off, i;
        unsigned ma, mi;
        int n = -1;
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu %n", &start, &end,
                   &off, &ma, &mi, &i, &n) < 6 || n <= 0) {
            ok = false;
            break;
        }
        const char *name = line + n;
        bool vdso = strcmp(name, "[vdso]") == 0;
        bool same = file && i == ino && ma == dmaj && mi == dmin &&
                    strcmp(name, file) == 0;
        if (!vdso && (name[0] != '/' || (i == 0 && ma == 0 && mi == 0)))
            continue; /* not a file: a file's run goes on past it */
        if (same) {
            high = end;
            continue;
        }
        if (file && !dwfl_report_module(dwfl, file, low, high))
            ok = false;
        free(file);
        file = NULL;
        char vname[48];
        if (vdso) {
            snprintf(vname, sizeof vname, "[vdso: %d]", pid);
            if (!dwfl_report_module(dwfl, vname, start, end))
                ok = false;
        } else if (off == 0) {
            if (!(file = strdup(name)))
                ok = false;
            low = start;
            high = end;
            ino = i;
            dmaj = ma;
            dmin = mi;
        }
    }
    if (ok && file && !dwfl_report_module(dwfl, file, low, high))
        ok = false;
    free(file);
    free(line);
    fclose(f);
    return ok ? 0 : -1;
}

int pyu_dwfl_live(int pid, pyu_dwfl **out, pyu_err *err)
{
    char root[64];
    snprintf(root, sizeof root, "/proc/%d/root", pid);
    pyu_dwfl *d = make(root, err);
    if (!d)
        return -err->code;
    d->pid = pid;
    int rc = report_maps(d->dwfl, pid);
    if (rc != 0 || dwfl_report_end(d->dwfl, NULL, NULL) != 0) {
        current = NULL;
        return fail(d, err, "listing the process's mapped files");
    }
    /* (the caller holds every thread stopped with ptrace) */
    rc = dwfl_linux_proc_attach(d->dwfl, pid, true);
    current = NULL;
    if (rc != 0) {
        pyu_err_set(err, PYU_E_IO, "native stacks: attaching libdwfl to "
                    "process %d: %s", pid,
                    rc > 0 ? strerror(rc) : dwfl_errmsg(-1));
        pyu_dwfl_free(d);
        return -PYU_E_IO;
    }
    *out = d;
    return 0;
}

int pyu_dwfl_core(int fd, const char *exe_path, const char *exe_override,
                  const char *sysroot, pyu_dwfl **out, pyu_err *err)
{
    pyu_dwfl *d = make(sysroot, err);
    if (!d)
        return -err->code;
    if ((exe_path && !(d->exe_path = strdup(exe_path))) ||
        (exe_override && !(d->exe_override = strdup(exe_override)))) {
        current = NULL;
        pyu_dwfl_free(d);
        pyu_err_set(err, PYU_E_NOMEM, "out of memory");
        return -PYU_E_NOMEM;
    }
    if (!(d->core = elf_begin(fd, ELF_C_READ_MMAP, NULL))) {
        current = NULL;
        pyu_err_set(err, PYU_E_IO, "native stacks: reading the core: %s",
                    elf_errmsg(-1));
        pyu_dwfl_free(d);
        return -PYU_E_IO;
    }
    char exe[4096];
    const char *main_file = NULL;
    if (exe_override)
        main_file = exe_override;
    else if (exe_path && sysroot &&
             snprintf(exe, sizeof exe, "%s%s", sysroot, exe_path) <
                 (int)sizeof exe)
        main_file = exe;
    else
        main_file = exe_path;
    if (dwfl_core_file_report(d->dwfl, d->core, main_file) < 0 ||
        dwfl_report_end(d->dwfl, NULL, NULL) != 0) {
        current = NULL;
        return fail(d, err, "listing the core's mapped files");
    }
    if (dwfl_core_file_attach(d->dwfl, d->core) < 0) {
        current = NULL;
        return fail(d, err, "reading the core's threads");
    }
    current = NULL;
    *out = d;
    return 0;
}

/* Offline: the files a process maps, reported by the caller, to name
 * the frames another unwinder found (a debugger's), as libdwfl names
 * the CLI's. */
static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

pyu_dwfl *pyu_dwfl_offline(void)
{
    pyu_dwfl *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (!(d->dwfl = dwfl_begin(&offline_callbacks))) {
        free(d);
        return NULL;
    }
    dwfl_report_begin(d->dwfl);
    return d;
}

void pyu_dwfl_offline_add(pyu_dwfl *d, const char *name, const char *path,
                          uint64_t bias)
{
    current = d;
    dwfl_report_elf(d->dwfl, name, path, -1, bias, false);
    current = NULL;
}

void pyu_dwfl_offline_done(pyu_dwfl *d)
{
    dwfl_report_end(d->dwfl, NULL, NULL);
}

/* Names pc (a caller's return address when caller): f->symbol (into
 * name, without a symbol version: "memcpy@@GLIBC_2.14" is "memcpy"),
 * f->offset, f->module; left alone when pc is in no reported file. */
static void describe(Dwfl *dwfl, uint64_t pc, bool caller,
                     pyu_native_frame *f, char *name, size_t namelen)
{
    Dwarf_Addr at = caller && pc ? pc - 1 : pc;
    Dwfl_Module *m = dwfl_addrmodule(dwfl, at);
    Dwarf_Addr low = 0, high = 0;
    /* (libdwfl gives the last module for an address past every module,
     * a return address that was a word of the stack) */
    if (!m || !dwfl_module_info(m, NULL, &low, &high, NULL, NULL, NULL,
                                NULL) || at < low || at >= high)
        return;
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *mainfile = NULL;
    const char *sn = dwfl_module_addrinfo(m, at, &off, &sym, NULL, NULL,
                                          NULL);
    f->symbol = NULL;
    f->offset = 0;
    if (sn && namelen) {
        snprintf(name, namelen, "%.*s", (int)strcspn(sn, "@"), sn);
        f->symbol = name;
        f->offset = off + (pc - at);
    }
    f->module = dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, &mainfile,
                                 NULL);
}

bool pyu_dwfl_name(pyu_dwfl *d, uint64_t pc, bool caller,
                   pyu_native_frame *f, char *name, size_t namelen)
{
    if (!d || !dwfl_addrmodule(d->dwfl, caller && pc ? pc - 1 : pc))
        return false;
    current = d;
    describe(d->dwfl, pc, caller, f, name, namelen);
    current = NULL;
    return true;
}

typedef struct walk_ctx {
    pyu_dwfl *d;
    pyu_native_fn fn;
    void *arg;
    int rc;     /* what fn returned, when it ended the walk */
    size_t n;
    uint64_t last_pc, last_sp;
    char name[512];
} walk_ctx;

static int one_frame(Dwfl_Frame *state, void *arg)
{
    walk_ctx *w = arg;
    Dwarf_Addr pc;
    bool activation;
    if (!dwfl_frame_pc(state, &pc, &activation))
        return DWARF_CB_ABORT;
    Dwarf_Word sp = 0;
    if (dwfl_frame_reg(state, X86_64_RSP, &sp) != 0)
        sp = 0;
    if (w->n && pc == w->last_pc && sp == w->last_sp)
        return DWARF_CB_ABORT; /* no progress: a loop */
    if (w->n++ >= PYU_MAX_NATIVE_FRAMES)
        return DWARF_CB_ABORT;
    w->last_pc = pc;
    w->last_sp = sp;
    /* a caller's pc is its return address: look up the call before it */
    pyu_native_frame f = {.pc = pc, .sp = sp};
    describe(w->d->dwfl, pc, !activation, &f, w->name, sizeof w->name);
    int rc = w->fn(w->arg, &f);
    if (rc != 0) {
        w->rc = rc;
        return DWARF_CB_ABORT;
    }
    return DWARF_CB_OK;
}

int pyu_dwfl_frames(pyu_dwfl *d, int tid, pyu_native_fn fn, void *arg,
                    pyu_err *err)
{
    walk_ctx w = {.d = d, .fn = fn, .arg = arg};
    current = d;
    int rc = dwfl_getthread_frames(d->dwfl, tid, one_frame, &w);
    current = NULL;
    if (w.rc)
        return w.rc;
    if (rc != 0 && w.n == 0) {
        pyu_err_set(err, PYU_E_IO, "native stack of thread %d: %s", tid,
                    dwfl_errmsg(-1));
        return -PYU_E_IO;
    }
    /* (an unwinder that stops part-way after some frames has said what
     * it could: the outermost frames are where CFI ends) */
    return 0;
}
