/* Private declarations of the pyunwind core.
 *
 * One section per file of core/src, from the bottom of the layering to the
 * top: a file uses only what sections above its own declare (see the
 * diagram in docs/architecture.md; ../shared/tools/core-circles checks
 * that no two files depend on each other). */
#ifndef PYUNWIND_INTERNAL_H
#define PYUNWIND_INTERNAL_H

#include "pyunwind/pyunwind.h"

#include <stdarg.h>
#include <stdbool.h>

#define PYU_HIDDEN __attribute__((visibility("hidden")))
#define PYU_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ================================================================ limits */

/* Walks of target memory. */
#define PYU_MAX_INTERPRETERS 256
#define PYU_MAX_THREADS 16384   /* per interpreter */
#define PYU_MAX_FRAMES 65536    /* per thread */
#define PYU_MAX_STRING 65536    /* characters of a name or file name */
#define PYU_MAX_LINETABLE (1u << 22)
#define PYU_MAX_SECTION (1u << 24) /* a struct size in the offsets table */
#define PYU_MAX_CODES 65536     /* cached code objects before starting over */
#define PYU_MAX_GENERATIONS 8   /* interpreters whose code epochs we track */
#define PYU_MAX_TASKS (1u << 20)
#define PYU_MAX_CORO_DEPTH 1024 /* frames of one coroutine chain */
#define PYU_MAX_AWAITERS (1u << 16) /* tasks awaiting one task */
#define PYU_MAX_SET_SLOTS (1u << 20)
#define PYU_MAX_ASYNC_LINKS 1024 /* tasks of one --async stack */

/* Local copies of remote structs.  Each struct size the offsets table (or
 * the .AsyncioDebug section) gives is checked once, at attach time,
 * against the buffer that holds its copies (offsets.c, asyncio.c); the
 * buffers are declared with these sizes and nothing else. */
#define PYU_BUF_FRAME 4096     /* _PyInterpreterFrame, plus PYU_CORO_PEEK */
#define PYU_CORO_PEEK 256      /* value stack read with a coroutine's frame */
#define PYU_BUF_CODE 4096      /* PyCodeObject up to co_code_adaptive */
#define PYU_BUF_TSTATE (1u << 20) /* PyThreadState (heap: the walk's) */
#define PYU_BUF_STR_HEADER 4096 /* PyCompactUnicodeObject */
#define PYU_STR_PEEK 256       /* str data read with its header */
#define PYU_BUF_BYTES_HEADER 256 /* PyBytesObject up to ob_sval */
#define PYU_BUF_TASK 4096      /* an asyncio TaskObj */
#define PYU_BUF_OFFSETS (24 + 8 * 256) /* the _Py_DebugOffsets table */

/* ================================================== errors (error.c) */

#define PYU_ERRMSG_MAX 1024
#define PYU_ERR_ARGS 4
#define PYU_ERR_CONTEXTS 6

/* A text whose formatting is put off until someone asks for it: a static
 * printf format whose conversions are %d %u %x %s with no, l, ll or z
 * length (at most PYU_ERR_ARGS of them), and its arguments.  Strings given
 * to %s must be static (literals, pyu_strerror texts). */
typedef struct pyu_err_arg {
    char conv; /* 'd', 'u', 'x', 's' */
    char len;  /* 0, 'l', 'L' (ll), 'z' */
    union {
        long long i;
        unsigned long long u;
        const char *s;
    } v;
} pyu_err_arg;

typedef struct pyu_err_part {
    const char *fmt; /* NULL: none */
    pyu_err_arg arg[PYU_ERR_ARGS];
} pyu_err_part;

/* A session's error record: a code and what failed, with the context each
 * level added ("interpreter 0: reading a thread state at 0x...: ...").
 * Failures on the hot path (pyu_fail, pyu_fail_ctx: reads, bad target
 * data) store only the code and their arguments; the one-line text is
 * made by pyu_err_text, when someone asks. */
typedef struct pyu_err {
    int code;            /* enum pyu_error, positive; PYU_E_OK: none */
    pyu_err_part base;   /* the failure; NULL fmt: it is in msg */
    pyu_err_part ctx[PYU_ERR_CONTEXTS]; /* innermost first */
    unsigned nctx;
    bool current;        /* msg holds the whole text */
    char msg[PYU_ERRMSG_MAX];
} pyu_err;

/* What to do about a refused read of a live process. */
#define PYU_PERM_REMEDY                                                      \
    "run pyunwind as the target's user with ptrace allowed "                 \
    "(sysctl kernel.yama.ptrace_scope=0), as root, or with CAP_SYS_PTRACE "  \
    "(setcap cap_sys_ptrace+ep on the pyunwind binary; in a container, "     \
    "docker run --cap-add SYS_PTRACE)"

/* Sets the error, formatting the text now (any arguments); returns -code.
 * For failures that happen once (opening a target). */
PYU_HIDDEN int pyu_err_set(pyu_err *e, int code, const char *fmt, ...)
    PYU_PRINTF(3, 4);
/* Prefixes "context: " to the message, formatting now; returns -code. */
PYU_HIDDEN int pyu_err_ctx(pyu_err *e, const char *fmt, ...) PYU_PRINTF(2, 3);
/* The same, formatted only when asked (see pyu_err_part for the formats
 * allowed); returns -code. */
PYU_HIDDEN int pyu_fail(pyu_err *e, int code, const char *fmt, ...)
    PYU_PRINTF(3, 4);
PYU_HIDDEN int pyu_fail_ctx(pyu_err *e, const char *fmt, ...)
    PYU_PRINTF(2, 3);
/* The record as one line ("" when empty). */
PYU_HIDDEN const char *pyu_err_text(pyu_err *e);
PYU_HIDDEN void pyu_err_clear(pyu_err *e);

/* ======================================= ELF files on disk (elf_file.c) */

#define PYU_BUILD_ID_MAX 64

typedef struct pyu_elf_info {
    bool has_pyruntime;      /* a .PyRuntime section */
    uint64_t pyruntime_vaddr;
    bool has_symbol;         /* a _PyRuntime dynamic symbol */
    uint64_t symbol_vaddr;
    bool has_py_version;     /* the value of its Py_Version (3.11+), or
                                of its PY_VERSION string (3.6-3.10) */
    uint64_t py_version;
    uint64_t base_vaddr;     /* first PT_LOAD p_vaddr, rounded down */
    bool has_asyncio;        /* an .AsyncioDebug section (3.14+) */
    uint64_t asyncio_vaddr, asyncio_size;
    uint8_t build_id[PYU_BUILD_ID_MAX]; /* its GNU build-id note */
    size_t build_id_len;                /* 0: none */
} pyu_elf_info;

/* A build-id as lowercase hex into out (size at least 2 * len + 1). */
PYU_HIDDEN void pyu_build_id_hex(const uint8_t *id, size_t len, char *out);
/* The GNU build-id in a run of ELF notes (len bytes, 4-byte aligned):
 * copied into id (PYU_BUILD_ID_MAX bytes); its length, or 0. */
PYU_HIDDEN size_t pyu_notes_build_id(const uint8_t *notes, size_t len,
                                     uint8_t *id);

/* Opens a file whose path came from the target (a core's NT_FILE, a
 * mapping, --core) for reading, only when it is a regular file: a FIFO or
 * a device never blocks the open (O_NONBLOCK) and is refused.  Returns
 * the descriptor, or -1 with errno set (EINVAL: not a regular file). */
PYU_HIDDEN int pyu_open_regular(const char *path);

/* Reads the section headers and dynamic symbols of the ELF file at path.
 * Returns 0 or a negated error (message in err). */
PYU_HIDDEN int pyu_elf_inspect(const char *path, pyu_elf_info *info,
                               pyu_err *err);
/* Calls libelf's elf_version once. */
PYU_HIDDEN bool pyu_elf_init(void);

/* =========================================== native stacks (native.c) */

#define PYU_MAX_NATIVE_FRAMES 1024 /* per thread */

/* libdwfl over a live process (every thread stopped by the caller with
 * ptrace, from the calling thread) or an ELF core (fd; the executable as
 * the core names it, --exe, --sysroot). */
typedef struct pyu_dwfl pyu_dwfl;
PYU_HIDDEN int pyu_dwfl_live(int pid, pyu_dwfl **out, pyu_err *err);
PYU_HIDDEN int pyu_dwfl_core(int fd, const char *exe_path,
                             const char *exe_override, const char *sysroot,
                             pyu_dwfl **out, pyu_err *err);
/* Calls fn for each native frame of thread tid (the kernel's id, as this
 * machine sees it), innermost first; returns 0, fn's non-zero value, or a
 * negated error (err set) when not even the first frame could be read. */
PYU_HIDDEN int pyu_dwfl_frames(pyu_dwfl *d, int tid, pyu_native_fn fn,
                               void *arg, pyu_err *err);
PYU_HIDDEN void pyu_dwfl_free(pyu_dwfl *d);
/* Names for frames another unwinder found: files reported one by one
 * (name as the target names it, path where it is read here, bias: its
 * load address less its first PT_LOAD's p_vaddr), then done. */
PYU_HIDDEN pyu_dwfl *pyu_dwfl_offline(void);
PYU_HIDDEN void pyu_dwfl_offline_add(pyu_dwfl *d, const char *name,
                                     const char *path, uint64_t bias);
PYU_HIDDEN void pyu_dwfl_offline_done(pyu_dwfl *d);
/* Fills f->symbol (into name), f->offset and f->module for pc (a
 * caller's return address when caller) as the CLI's unwinder names it;
 * false when pc lies in no reported file. */
PYU_HIDDEN bool pyu_dwfl_name(pyu_dwfl *d, uint64_t pc, bool caller,
                              pyu_native_frame *f, char *name,
                              size_t namelen);

/* ========================================= memory back ends (mem_*.c) */

/* Live process.  Creates the context for pid; fills err on failure. */
PYU_HIDDEN int pyu_live_create(int pid, unsigned flags, void **ctx,
                               pyu_err *err);
PYU_HIDDEN extern const pyu_memory_ops pyu_live_ops;

/* ELF core file. */
PYU_HIDDEN int pyu_core_create(const char *path, const char *exe,
                               const char *sysroot, void **ctx, int *pid,
                               pyu_err *err);
PYU_HIDDEN extern const pyu_memory_ops pyu_core_ops;
/* The size a cut-off core should have (0 when it is whole); *have gets its
 * real size. */
PYU_HIDDEN uint64_t pyu_core_truncated(void *ctx, uint64_t *have);

/* ======================================================== debug offsets */

#define PYU_OFFSET_FIELDS(X)                                                 \
    X(rt_size) X(rt_finalizing) X(rt_interpreters_head) X(rt_main_thread)    \
    X(rt_gil_holder) X(rt_gil_locked) X(is_runtime)                          \
    X(is_size) X(is_id) X(is_next) X(is_threads_head) X(is_threads_main)     \
    X(is_gc) X(is_imports_modules) X(is_sysdict) X(is_builtins)              \
    X(is_ceval_gil) X(is_gil_runtime_state) X(is_gil_enabled)                \
    X(is_gil_locked) X(is_gil_holder) X(is_code_object_generation)           \
    X(is_tlbc_generation)                                                    \
    X(ts_size) X(ts_prev) X(ts_next) X(ts_interp) X(ts_current_frame)        \
    X(ts_base_frame) X(ts_last_profiled_frame)                               \
    X(ts_last_profiled_frame_seq) X(ts_thread_id) X(ts_native_thread_id)     \
    X(ts_datastack_chunk) X(ts_status) X(ts_holds_gil) X(ts_gil_requested)   \
    X(ts_current_exception) X(ts_exc_state) X(ts_exc_info)                   \
    X(ts_cframe) X(cframe_current_frame) X(cframe_previous)                  \
    X(ts_root_cframe)                                                        \
    X(err_exc_value) X(err_previous_item)                                    \
    X(fr_size) X(fr_previous) X(fr_executable) X(fr_instr_ptr)               \
    X(fr_localsplus) X(fr_owner) X(fr_stackpointer) X(fr_tlbc_index)         \
    X(fr_is_entry) X(fr_funcobj) X(fr_stacktop) X(fr_return_offset)          \
    X(fr_state)                                                              \
    X(fr_gen)                                                                \
    X(co_size) X(co_filename) X(co_name) X(co_qualname) X(co_linetable)      \
    X(co_firstlineno) X(co_argcount) X(co_localsplusnames)                   \
    X(co_localspluskinds) X(co_code_adaptive) X(co_tlbc)                     \
    X(co_flags) X(co_kwonlyargcount) X(co_firsttraceable) X(co_names)        \
    X(co_nlocalsplus) X(co_stacksize) X(ts_datastack_top) X(co_code)         \
    X(co_varnames) X(co_cellvars) X(co_freevars)                             \
    X(ob_size) X(ob_type) X(cell_ob_ref)                                     \
    X(tp_size) X(tp_name) X(tp_repr) X(tp_flags) X(tp_basicsize)             \
    X(tp_dictoffset) X(tp_dict) X(tp_mro) X(md_dict) X(descr_member)         \
    X(ht_size) X(ht_cached_keys) X(fr_globals) X(fr_builtins) X(fr_locals)   \
    X(tuple_size) X(tuple_ob_item) X(tuple_ob_size)                          \
    X(list_size) X(list_ob_item) X(list_ob_size)                             \
    X(set_size) X(set_used) X(set_table) X(set_mask)                         \
    X(dict_size) X(dict_ma_used) X(dict_ma_keys) X(dict_ma_values)           \
    X(float_size) X(float_ob_fval)                                           \
    X(long_size) X(long_lv_tag) X(long_ob_digit)                             \
    X(bytes_size) X(bytes_ob_size) X(bytes_ob_sval)                          \
    X(str_size) X(str_state) X(str_length) X(str_ascii_size)                 \
    X(str_compact_size)                                                      \
    X(gc_size) X(gc_collecting) X(gc_frame) X(gc_generation_stats_size)      \
    X(gc_generation_stats)                                                   \
    X(gen_size) X(gen_gi_name) X(gen_gi_iframe) X(gen_gi_frame_state)        \
    X(llist_next) X(llist_prev)                                              \
    X(dbg_eval_breaker) X(dbg_remote_debugger_support)                       \
    X(dbg_remote_debugging_enabled) X(dbg_debugger_pending_call)             \
    X(dbg_debugger_script_path) X(dbg_debugger_script_path_size)

enum pyu_field {
#define PYU_FIELD_ENUM_(n) PYU_F_##n,
    PYU_OFFSET_FIELDS(PYU_FIELD_ENUM_)
#undef PYU_FIELD_ENUM_
    PYU_F_COUNT
};

#define PYU_ABSENT UINT64_MAX /* a field this version does not publish */

/* The offsets of one target, normalised across versions: everything that
 * differs between CPython versions is decided here, once, so that walkers
 * test fields (PYU_HAS) and read these facts, never version numbers. */
typedef struct pyu_offsets {
    uint64_t v[PYU_F_COUNT];
    uint64_t version_hex;
    bool free_threaded;
    uint64_t tag_mask;  /* low bits to clear in a _PyStackRef */
    unsigned str_kind_shift; /* bit position of `kind` in the state word */
    uint32_t holds_gil_mask; /* bits of the u32 at ts_holds_gil that say
                                the thread holds the GIL */
    /* generator-like objects (3.14+): gi_frame_state values, and where the
     * awaited object sits below a suspended frame's stack pointer */
    int8_t gen_yield_from, gen_yield_from_locked, gen_cleared;
    uint8_t await_slot;
    /* before 3.12: an int's sign and digit count are its ob_size (no
     * lv_tag), and a split dict's insertion order lies in the bytes just
     * before its values (3.13: a 4-byte header, the order after them) */
    bool long_size_signed;
    bool dict_order_before;
    /* before 3.11: a dict's keys are {refcnt, size, lookup, usable,
     * nentries, indices...} and a split dict's values a plain array */
    bool dict_keys_old;
    /* the layout is pyunwind's own (a version without debug offsets) */
    bool builtin;
    /* an object whose type has Py_TPFLAGS_MANAGED_DICT keeps its dict
     * pointer this many bytes before it; 3.11 keeps its values pointer
     * (PyDictValues *) at managed_values_back, 0 from 3.13 (the values are
     * inline, after tp_basicsize bytes, with Py_TPFLAGS_INLINE_VALUES) */
    uint8_t managed_dict_back, managed_values_back;
    /* 3.12: the word managed_dict_back before the object is the values
     * less one (its low bit set) when it is not a dict */
    bool managed_dict_tagged;
    /* a frame's instruction pointer can be the last inline cache entry of
     * its instruction (3.11's prev_instr, in a frame that made a call) */
    bool instr_in_caches;
    /* before 3.11: a thread's frames are PyFrameObjects on the heap,
     * linked by f_back (fr_previous) from the thread state's frame
     * (ts_current_frame); each names its code (fr_executable) and keeps
     * the last instruction run as an int, f_lasti (fr_instr_ptr), in
     * bytes (3.9: lasti_scale 2) or code units (3.10: 1), -1 before the
     * first; the bytecode is the bytes object co_code; no owner, no data
     * stack, no native thread id (threads.c finds it) */
    bool object_frames;
    uint8_t lasti_scale;
    /* how a frame object says it runs (fr_state): PYU_STATE_EXECUTING,
     * 3.9's f_executing (1 while its eval loop runs it), or
     * PYU_STATE_310, 3.10's f_state (FRAME_EXECUTING 0, FRAME_UNWINDING 2
     * while it handles an exception) */
    uint8_t frame_state_kind;
    /* which format co_linetable has: PYU_LINES_* */
    uint8_t linetable_kind;
} pyu_offsets;

/* co_linetable's formats: 3.11+'s location table, 3.10's line table
 * (pairs of a bytecode delta and a signed line delta, -128: no line),
 * 3.9's co_lnotab (pairs of the same, read as a line number table) */
enum { PYU_LINES_LOCATIONS, PYU_LINES_310, PYU_LINES_LNOTAB };
enum { PYU_STATE_NONE, PYU_STATE_EXECUTING, PYU_STATE_310 };

#define PYU_OFF(o, f) ((o)->v[PYU_F_##f])
#define PYU_HAS(o, f) ((o)->v[PYU_F_##f] != PYU_ABSENT)

/* "3.14.7", "3.15.0b4" */
PYU_HIDDEN void pyu_version_string(uint64_t hex, char *out, size_t outlen);
/* The field ids of a version's table in order (n of them), or NULL when
 * the layout is unknown. */
PYU_HIDDEN const uint8_t *pyu_offsets_layout(uint64_t version_hex, size_t *n);
/* Number of uint64 fields of a version's table after the 24-byte prefix,
 * or 0 when the layout is unknown (tests use it). */
PYU_HIDDEN size_t pyu_offsets_layout_fields(uint64_t version_hex);

/* ======================================================== the session */

/* Each module's state hangs off the session as an opaque pointer, created
 * by the module when first needed and freed by its *_free function. */
struct pyu_codes;
struct pyu_types;
struct pyu_chunks;
struct pyu_threads;
struct pyu_aio;
typedef struct pyu_strtab pyu_strtab;

#define PYU_TID_MEMO 256 /* threads' ids a session remembers (before 3.11;
                            threads.c's hash takes 8 bits) */

struct pyu_session {
    pyu_err err;
    const pyu_memory_ops *ops;
    void *ctx;
    bool opened;
    int pid;
    uint64_t runtime;
    pyu_offsets off;
    char version[32];
    char *found_in;
    uint64_t code_epoch;         /* pyu_code_epoch(); moved on by code.c */
    uint64_t reads;              /* read calls made (source.c) */
    uint64_t version_hint;       /* pyu_set_version_hint(), or 0 */
    uint64_t none_addr;          /* where None is, once seen (status.c) */
    int32_t pthread_tid_at;      /* before 3.11: where glibc's struct
                                    pthread keeps the thread's id; 0 not
                                    yet found, -1 not findable (threads.c) */
    uint64_t tid_memo[PYU_TID_MEMO][2]; /* ... pthread_t -> that id, read
                                    since the thread lists were last read
                                    whole (threads.c) */
    pyu_native_frames_fn native_fn; /* the caller's unwinder, or NULL */
    void *native_arg;

    struct pyu_codes *codes;     /* code.c */
    pyu_strtab *strings;         /* strings.c: remote str -> UTF-8 */
    struct pyu_types *types;     /* types.c */
    struct pyu_chunks *chunks;   /* chunks.c */
    struct pyu_threads *threads; /* threads.c */
    struct pyu_aio *aio;         /* asyncio.c */
};

/* =========================================== reading memory (source.c) */

/* Reads len bytes at addr; on failure records "reading WHAT at 0x...: why"
 * (formatted when asked; `what` must be a literal).  A NULL addr fails
 * with PYU_E_CORRUPT.  Returns 0 or a negated error. */
PYU_HIDDEN int pyu_read(pyu_session *s, uint64_t addr, void *buf, size_t len,
                        const char *what);
/* Several ranges in one call of the back end. */
PYU_HIDDEN int pyu_readv(pyu_session *s, const pyu_range *r, size_t n,
                         const char *what);
/* Reads that may fail without it being an error (speculation, probing):
 * the error record is left alone.  Return 0 or the back end's code. */
PYU_HIDDEN int pyu_read_quiet(pyu_session *s, uint64_t addr, void *buf,
                              size_t len);
PYU_HIDDEN int pyu_readv_quiet(pyu_session *s, const pyu_range *r, size_t n);
/* Runs fn with the target stopped (when the memory source can stop it) and
 * lets it run again.  Returns what fn returned, or the negated error of
 * stopping. */
PYU_HIDDEN int pyu_paused(pyu_session *s, int (*fn)(pyu_session *, void *),
                          void *arg);

/* Brent's cycle detector over a chain of addresses: start with
 * cycle c = {0, 1, 0}; cycle_step says whether addr was seen before. */
typedef struct cycle {
    uint64_t saved;
    size_t power, steps;
} cycle;

static inline bool cycle_step(cycle *c, uint64_t addr)
{
    if (addr == c->saved)
        return true;
    if (++c->steps == c->power) {
        c->saved = addr;
        c->power *= 2;
        c->steps = 0;
    }
    return false;
}

/* Little-endian field access into a local copy of a remote struct; offsets
 * past `len` yield 0 (the table validation makes that impossible for
 * fields that are used). */
static inline uint64_t pyu_u64(const void *buf, size_t len, uint64_t off)
{
    uint64_t v = 0;
    if (off <= len && len - off >= 8)
        __builtin_memcpy(&v, (const char *)buf + off, 8);
    return v;
}
static inline uint32_t pyu_u32(const void *buf, size_t len, uint64_t off)
{
    uint32_t v = 0;
    if (off <= len && len - off >= 4)
        __builtin_memcpy(&v, (const char *)buf + off, 4);
    return v;
}
static inline uint8_t pyu_u8(const void *buf, size_t len, uint64_t off)
{
    return off < len ? ((const uint8_t *)buf)[off] : 0;
}

/* =========================================== mapped files (mapped.c) */

typedef struct pyu_mapped_file {
    char *path;         /* owned; as the target names it */
    uint64_t base;      /* address of file offset 0 */
    int inspected;      /* 0: not yet, 1: info valid, -1: not readable ELF */
    pyu_elf_info info;
} pyu_mapped_file;

typedef struct pyu_mapped {
    pyu_mapped_file *files; /* owned; files whose name contains "python"
                               first, then in address order */
    size_t nfiles;
    struct {
        uint64_t start, end;
    } *writable; /* owned: readable and writable mappings */
    size_t nwritable;
} pyu_mapped;

/* Lists the files mapped at offset 0 (each once) whose base name passes
 * `want` (NULL: all), and the writable mappings.  Returns 0, or a negated
 * error with the message set (the process is gone, access refused). */
PYU_HIDDEN int pyu_mapped_scan(pyu_session *s, bool (*want)(const char *base),
                               pyu_mapped *out);
/* The ELF facts of a listed file, read once (through the source's
 * file_path); NULL when it cannot be read. */
PYU_HIDDEN const pyu_elf_info *pyu_mapped_inspect(pyu_session *s,
                                                  pyu_mapped_file *f);
PYU_HIDDEN void pyu_mapped_free(pyu_mapped *m);

/* ======================================== debug offsets (offsets.c) */

/* Reads and validates the table at runtime_addr (the cookie already
 * checked).  Returns 0 or a negated error naming what is wrong. */
PYU_HIDDEN int pyu_offsets_read(pyu_session *s, uint64_t runtime_addr,
                                pyu_offsets *out);

/* The versions read, for messages. */
#define PYU_VERSIONS_READ "CPython 3.9-3.15"

/* The built-in layout of a version without debug offsets (3.11), with the
 * runtime's version (Py_Version).  Returns 0, or -PYU_E_VERSION naming
 * the versions read. */
PYU_HIDDEN int pyu_offsets_builtin(pyu_session *s, uint64_t version_hex,
                                   pyu_offsets *out);

/* The version (minor only) of a runtime without debug offsets whose
 * shape starts at buf + k (a copy of memory at addr - k), or 0. */
PYU_HIDDEN uint64_t pyu_builtin_runtime_at(const uint8_t *buf, size_t len,
                                           size_t k, uint64_t addr);

/* ======================================= finding _PyRuntime (runtime.c) */

/* Locates _PyRuntime (section, symbol, then scan) and reads its offsets.
 * hint: a known address, or 0. */
PYU_HIDDEN int pyu_runtime_find(pyu_session *s, uint64_t hint);

/* ======================================= tables by address (table.c) */

/* Open-addressing tables whose elements start with a non-zero uint64_t
 * key (0 marks a free slot); capacities are powers of two. */
static inline size_t pyu_slot(uint64_t key, size_t cap)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (cap - 1);
}
/* Doubles *slots (*cap elements of el bytes each; an empty table gets
 * `first` elements); false when out of memory. */
PYU_HIDDEN bool pyu_table_grow(void **slots, size_t *cap, size_t el,
                               size_t first);

/* Makes room for one more of the n elements (el bytes each) of *array,
 * doubling *cap (first: 8); false when out of memory. */
PYU_HIDDEN bool pyu_grow(void **array, size_t n, size_t *cap, size_t el);

/* An index over the elements of an array, whose elements are their own
 * keys: a slot holds an element number + 1 (0: free) and the key's hash,
 * so that most probes compare no element.  Up to UINT32_MAX - 1 elements;
 * capacities are powers of two (64 first). */
typedef struct pyu_ix_slot {
    uint32_t elem1;
    uint32_t hash;
} pyu_ix_slot;

typedef struct pyu_ix {
    pyu_ix_slot *slots; /* owned */
    size_t cap, n;
} pyu_ix;

/* Doubles the index; false when out of memory. */
PYU_HIDDEN bool pyu_ix_grow(pyu_ix *x);

/* Makes room for one more element (after a failed find, find again: the
 * free slot may have moved). */
static inline bool pyu_ix_room(pyu_ix *x)
{
    return (x->n + 1) * 4 < x->cap * 3 || pyu_ix_grow(x);
}

/* Fills the free slot `at` (from PYU_IX_FIND) with element elem. */
static inline void pyu_ix_put(pyu_ix *x, size_t at, uint32_t h, size_t elem)
{
    x->slots[at] = (pyu_ix_slot){(uint32_t)elem + 1, h};
    x->n++;
}

/* Probes x (which has room: cap > 0) for hash h: the element number e of
 * the first slot whose element the expression EQ (over e) accepts, or -1
 * with *at set to the free slot to fill. */
#define PYU_IX_FIND(x, h, at, EQ)                                              \
    ({                                                                         \
        long found_ = -1;                                                      \
        size_t i_ = (h) & ((x)->cap - 1);                                      \
        for (; (x)->slots[i_].elem1; i_ = (i_ + 1) & ((x)->cap - 1)) {         \
            if ((x)->slots[i_].hash == (h)) {                                  \
                size_t e = (x)->slots[i_].elem1 - 1;                           \
                (void)e;                                                       \
                if (EQ) {                                                      \
                    found_ = (long)e;                                          \
                    break;                                                     \
                }                                                              \
            }                                                                  \
        }                                                                      \
        *(at) = i_;                                                            \
        found_;                                                                \
    })

/* A 64-bit hash's bits mixed down to 32 (for an index). */
static inline uint32_t pyu_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return (uint32_t)h;
}

/* FNV-1a of n bytes. */
static inline uint64_t pyu_hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* A string table: remote address -> owned UTF-8 copy. */
PYU_HIDDEN pyu_strtab *pyu_strtab_new(void);
PYU_HIDDEN void pyu_strtab_free(pyu_strtab *t);
PYU_HIDDEN const char *pyu_strtab_get(const pyu_strtab *t, uint64_t key);
PYU_HIDDEN const char *pyu_strtab_put(pyu_strtab *t, uint64_t key,
                                      const char *text, size_t len);

/* ================================================ strings (strings.c) */

/* The UTF-8 text of the str object at addr, cached in the session (valid
 * until its caches are flushed).  NULL on error (record set). */
PYU_HIDDEN const char *pyu_str_read(pyu_session *s, uint64_t addr);
/* The first characters of the str at addr as code points (at most max
 * into cp; not cached) and its length in *length.  Returns how many were
 * read, or -1 (record set). */
PYU_HIDDEN long pyu_str_peek(pyu_session *s, uint64_t addr, uint32_t *cp,
                             size_t max, int64_t *length);
PYU_HIDDEN void pyu_strings_flush(pyu_session *s);
PYU_HIDDEN void pyu_strings_free(pyu_session *s);

/* ================================================= type objects (types.c) */

/* What a type object is, as far as the walks care. */
enum pyu_type_kind {
    PYU_TYPE_OTHER,
    PYU_TYPE_UNNAMED,    /* readable, but its name is not (a core whose
                            binaries are gone) */
    PYU_TYPE_CODE,       /* code */
    PYU_TYPE_NONE,       /* NoneType */
    PYU_TYPE_COROUTINE,  /* coroutine (not a subclass) */
    PYU_TYPE_AGEN_AWAIT, /* async_generator_asend / _athrow */
    /* the built-in types a value's repr shows (values.c) */
    PYU_TYPE_INT,
    PYU_TYPE_BOOL,
    PYU_TYPE_FLOAT,
    PYU_TYPE_STR,
    PYU_TYPE_BYTES,
    PYU_TYPE_TUPLE,
    PYU_TYPE_LIST,
    PYU_TYPE_DICT,
    PYU_TYPE_SET,
    PYU_TYPE_FROZENSET,
    PYU_TYPE_CELL,
    /* what py-print's attributes meet (lookup.c) */
    PYU_TYPE_MODULE,     /* module (not a subclass) */
    PYU_TYPE_PROPERTY,   /* property */
    PYU_TYPE_MEMBER,     /* member_descriptor: a __slots__ entry */
    PYU_TYPE_GETSET,     /* getset_descriptor */
};

#define PYU_TPFLAGS_INLINE_VALUES (1ul << 2)
#define PYU_TPFLAGS_MANAGED_DICT (1ul << 4)
#define PYU_TPFLAGS_HEAPTYPE (1ul << 9)
#define PYU_TPFLAGS_LONG_SUBCLASS (1ul << 24)
#define PYU_TPFLAGS_LIST_SUBCLASS (1ul << 25)
#define PYU_TPFLAGS_TUPLE_SUBCLASS (1ul << 26)
#define PYU_TPFLAGS_BYTES_SUBCLASS (1ul << 27)
#define PYU_TPFLAGS_UNICODE_SUBCLASS (1ul << 28)
#define PYU_TPFLAGS_DICT_SUBCLASS (1ul << 29)
#define PYU_TPFLAGS_TYPE_SUBCLASS (1ul << 31)

#define PYU_TYPE_NAME_MAX 64 /* bytes of a type's name kept (with the NUL) */

typedef struct pyu_type {
    uint64_t addr;
    uint64_t flags; /* tp_flags */
    uint8_t kind;   /* enum pyu_type_kind */
    char name[PYU_TYPE_NAME_MAX]; /* tp_name, cut to fit; "" when unread */
} pyu_type;

/* The type object at addr, read once and cached (flushed with the code
 * cache); NULL with the record set when it cannot be read.  The pointer is
 * valid until the next call of pyu_type_*. */
PYU_HIDDEN const pyu_type *pyu_type_get(pyu_session *s, uint64_t addr);
/* The type of the object at obj (its ob_type), as pyu_type_get. */
PYU_HIDDEN const pyu_type *pyu_type_of(pyu_session *s, uint64_t obj);
/* Records what a type was found to be (an unnamed type that decodes as
 * code). */
PYU_HIDDEN void pyu_type_learn(pyu_session *s, uint64_t addr,
                               enum pyu_type_kind kind);
PYU_HIDDEN void pyu_types_flush(pyu_session *s);
PYU_HIDDEN void pyu_types_free(pyu_session *s);

/* ================================================ values (values.c) */

#define PYU_REPR_CHARS 100 /* characters of a str (bytes of a bytes) shown */
#define PYU_REPR_ITEMS 10  /* elements of a container shown */
#define PYU_REPR_DEPTH 3   /* containers inside containers shown */
#define PYU_REPR_READS 256 /* objects one repr reads */

/* Writes a bounded repr of the object at obj into out (cap bytes, at
 * least 64, NUL-terminated; a text cut short ends in "..."), and the name
 * of its type into type (type_cap bytes; "" when unreadable; type may be
 * NULL).  Reads memory only, never fails: an object that cannot be read
 * shows as <unreadable>, one of another type as <TypeName at 0xADDR>. */
PYU_HIDDEN void pyu_repr(pyu_session *s, uint64_t obj, char *out, size_t cap,
                         char *type, size_t type_cap);
/* The shortest decimal that reads back as v, as Python's repr writes it
 * ("1.0", "1e+16", "-0.0", "nan"). */
PYU_HIDDEN void pyu_float_repr(double v, char *out, size_t cap);
/* Calls fn for each key of the set (or frozenset) object at set, in table
 * order, looking at no more than max_slots slots (*cut set when the table
 * has more).  Returns 0, fn's non-zero value, or -1 (record set: the set
 * cannot be read or makes no sense). */
PYU_HIDDEN int pyu_set_each(pyu_session *s, uint64_t set, size_t max_slots,
                            int (*fn)(void *arg, uint64_t key), void *arg,
                            bool *cut);

/* pyu_frame_locals without the values' reprs (names and objects only:
 * v->value is "", or the decimal of an int tagged in its slot). */
PYU_HIDDEN int pyu_frame_locals_bare(pyu_session *s, const pyu_walk_frame *f,
                                     int (*fn)(void *arg, const pyu_var *v),
                                     void *arg);
/* Called for each entry of a dict: its key and its value (objects).
 * Non-zero stops the walk. */
typedef int (*pyu_item_fn)(void *arg, uint64_t key, uint64_t value);
/* Calls fn for each entry of the dict object at dict, in insertion order,
 * looking at no more than max entries; *used gets its ma_used.  Returns 0,
 * fn's non-zero value, or a negated error (record set). */
/* threading's names of an interpreter's threads (lookup.c): from the
 * interpreter frame at frame (threading.py's, whose globals hold
 * `_active`; or one whose scopes hold the threading module), each entry
 * of threading._active: a thread's ident and its Thread's _name (a str),
 * to fn, which returns non-zero to stop.  0, or a negated error. */
PYU_HIDDEN int pyu_thread_names(pyu_session *s, uint64_t frame,
                                int (*fn)(void *arg, uint64_t ident,
                                          const char *name),
                                void *arg);
PYU_HIDDEN int pyu_dict_each(pyu_session *s, uint64_t dict, size_t max,
                             pyu_item_fn fn, void *arg, int64_t *used);
/* The same over a dict's keys object and, for a split table (a dict's
 * ma_values, or an object's inline values), its PyDictValues; values 0
 * for a combined table. */
PYU_HIDDEN int pyu_keys_each(pyu_session *s, uint64_t keys, uint64_t values,
                             size_t max, pyu_item_fn fn, void *arg);

/* ============================================== code objects (code.c) */

/* A cached code object: what frames need, decoded once. */
typedef struct pyu_code {
    uint64_t addr;       /* 0: empty slot */
    bool stale;          /* reading it failed part-way: read it again */
    const char *qualname; /* in the session's string cache */
    const char *name;
    const char *filename;
    uint64_t str_addr[3]; /* remote addresses of qualname, name, filename */
    uint64_t type_addr, linetable_addr; /* (see pyu_code_unchanged) */
    uint8_t *linetable;   /* owned */
    uint32_t linetable_len;
    int firstlineno;
    int32_t firsttraceable; /* 3.11: code units before the first RESUME */
    uint8_t linetable_kind; /* PYU_LINES_* */
    uint32_t ncode;       /* its code units (0: unknown) */
    uint64_t code_bytes;  /* before 3.11: where they lie (in co_code, a
                             bytes object), or 0; from 3.11 in the code
                             object, at co_code_adaptive */
    uint32_t nlocalsplus; /* its locals, cells and free variables (3.11+;
                             0: none or unknown) */
    uint32_t framesize;   /* bytes its frame takes on the data stack
                             (0: unknown) */
    uint64_t tlbc_array;  /* address of co_tlbc (free-threaded), or 0 */
    int32_t tlbc_memo_index; /* last thread-local bytecode looked up */
    uint64_t tlbc_memo_base;
    uint32_t memo_instr;  /* one-entry memo of instr -> line */
    int memo_line;
} pyu_code;

/* The line of code unit index in a line table older than 3.11's
 * (kind: PYU_LINES_310 or PYU_LINES_LNOTAB), first_line its code's
 * co_firstlineno; -1 when none (linetable.c). */
PYU_HIDDEN int pyu_linetable_line_old(const uint8_t *t, size_t len,
                                      int first_line, uint64_t index,
                                      int kind);

/* The cached code object at addr, reading it on a miss; NULL with the
 * record set when addr is not a readable code object.  *is_code is false
 * (and NULL returned without error) when the object is readable but not a
 * code object.  A record stays where it is until the caches are flushed
 * (the code epoch moves). */
PYU_HIDDEN const pyu_code *pyu_code_get(pyu_session *s, uint64_t addr,
                                        bool *is_code);
/* The cached code object at addr, or NULL; never reads. */
PYU_HIDDEN const pyu_code *pyu_code_cached(pyu_session *s, uint64_t addr);
/* The code object whose bytecode (its own, or the thread-local copy
 * looked up last) holds instr_ptr: a cached one, or one found by looking
 * back from instr_ptr, read and cached; NULL when none is found. */
PYU_HIDDEN const pyu_code *pyu_code_at_instr(pyu_session *s,
                                             uint64_t instr_ptr);
/* The part of a code object holding the fields a record is made from:
 * [*off, *off + *len) from its address. */
PYU_HIDDEN void pyu_code_fields(const pyu_offsets *o, size_t *off,
                                size_t *len);
/* Whether a new copy of that part (cpy) shows the object c was read from
 * still: the same type, names, location table and first line. */
PYU_HIDDEN bool pyu_code_unchanged(const pyu_session *s, const pyu_code *c,
                                   const uint8_t *cpy);
/* Index in code units of the instruction at instr_ptr, in the bytecode
 * the frame runs (thread-local copy tlbc_index on free-threaded builds);
 * PYU_INSTR_UNKNOWN when it lies outside. */
PYU_HIDDEN uint32_t pyu_code_instr(pyu_session *s, const pyu_code *c,
                                   uint64_t instr_ptr, int32_t tlbc_index);
/* Whether a frame (owner, instr_ptr) running c is still in its prologue
 * (3.11's _PyFrame_IsIncomplete): CPython shows no such frame. */
PYU_HIDDEN bool pyu_code_incomplete(const pyu_session *s, const pyu_code *c,
                                    uint8_t owner, uint64_t instr_ptr);
/* The line of instruction `instr` (0 when unknown). */
PYU_HIDDEN int pyu_code_line(const pyu_code *c, uint32_t instr);
/* The position of instruction `instr` into f's line, end_line, col and
 * end_col (the line as pyu_code_line's; unknown ones 0 and -1). */
PYU_HIDDEN void pyu_code_position(const pyu_code *c, uint32_t instr,
                                  pyu_frame *f);
/* The instruction a frame runs, for PYU_SAMPLE_OPCODES: *instr (its
 * index in code units in the bytecode at `bytecode`: the code object's, or
 * a thread's copy of it) moved to the instruction itself when the frame
 * points into its inline cache (o->instr_in_caches), and its names as the
 * target runs it and as it was compiled, read from the target; *op and
 * *base "" when it cannot be read or named. */
PYU_HIDDEN void pyu_code_opcode(pyu_session *s, uint64_t bytecode,
                                uint32_t *instr, const char **op,
                                const char **base);
/* Opcode op's name in CPython version_hex (opcodes.c, written by
 * scripts/gen-opcodes), in *base the instruction it specialises or
 * instruments, in *caches the code units of inline cache after it; NULL
 * (*base NULL, *caches 0) for a version or number it does not know. */
PYU_HIDDEN const char *pyu_opcode_name(uint64_t version_hex, unsigned op,
                                       const char **base, unsigned *caches);
/* A call instruction of a code object (call_sites.c): its first code
 * unit (EXTENDED_ARG included), the unit of the call itself, and the
 * remote address of the name its callable was loaded by (an interned
 * str of co_names), 0 where the bytecode does not tell. */
typedef struct pyu_call_site {
    uint32_t start, at;
    uint64_t name;
} pyu_call_site;
#define PYU_CALL_SITES_UNITS 16384 /* code units of a code analysed at most */
/* The call instructions of c (CPython 3.9, 3.10: frame objects), in
 * order, up to max of them, into sites: how many, 0 for a version or a
 * code it does not analyse, -1 when the code could not be read. */
PYU_HIDDEN long pyu_code_call_sites(pyu_session *s, const pyu_code *c,
                                    pyu_call_site *sites, size_t max);
/* Whether the instruction at code unit `at` of c can run after one at
 * any of the units from[0..nfrom) in one run of a frame: 1 or 0 (sure),
 * -1 when it cannot be told (3.9, 3.10 only). */
PYU_HIDDEN int pyu_code_reaches(pyu_session *s, const pyu_code *c,
                                const uint32_t *from, size_t nfrom,
                                uint32_t at);
/* Drops the code, string and type caches and moves the epoch on. */
PYU_HIDDEN void pyu_caches_flush(pyu_session *s);
PYU_HIDDEN void pyu_codes_free(pyu_session *s);

/* ======================================= data-stack chunks (chunks.c) */

/* Local copies of a thread's data-stack chunks, where its frames live, so
 * that a walk reads each chunk once instead of each frame. */

/* Starts over for a thread whose current chunk is at `chunk`, used up to
 * `used_end` (the end of its innermost frame). */
PYU_HIDDEN void pyu_chunks_reset(pyu_session *s, uint64_t chunk,
                                 uint64_t used_end);
/* A chunk's copy: remote [start, end) is at local. */
typedef struct pyu_chunk_span {
    uint64_t start, end;
    const uint8_t *local;
} pyu_chunk_span;

/* The local copy of len bytes at addr when they lie in one of the
 * thread's chunks (copying more chunks as needed), else NULL; *span gets
 * the chunk, so that the caller serves the next frames in it without a
 * call.  Both are valid until the next call. */
PYU_HIDDEN const uint8_t *pyu_chunks_find(pyu_session *s, uint64_t addr,
                                          size_t len, pyu_chunk_span *span);
PYU_HIDDEN void pyu_chunks_free(pyu_session *s);

/* ============================================== frames (frames.c) */

/* The fields of a frame that walks and the sampler's checks use, as one
 * copy of it shows them. */
typedef struct pyu_frame_raw {
    uint64_t addr, prev;
    uint64_t code;      /* f_executable, tag bits cleared */
    uint64_t instr_ptr;
    uint64_t ip;        /* instr_ptr with the thread-local bytecode index
                           mixed in: a key for (code, instruction) memos */
    uint64_t func;      /* the function it runs (f_funcobj; 3.11 f_func),
                           tag bits cleared; 0 where unknown */
    uint64_t sp;        /* the top of its value stack as the frame last saved
                           it (3.13: 0 while it runs), remote; 0: unknown */
    int32_t tlbc;       /* free-threaded: its thread-local bytecode */
    uint8_t owner;      /* PYU_OWNER_*; PYU_OWNER_ENTRY and up: a shim */
    bool entry;         /* 3.11: the first frame of an eval loop C code
                           called */
} pyu_frame_raw;

/* Takes a frame's fields from a copy of fsize bytes of it. */
PYU_HIDDEN void pyu_frame_raw_take(const pyu_offsets *o, uint64_t addr,
                                   const uint8_t *buf, size_t fsize,
                                   pyu_frame_raw *f);

/* How a chain walk ended. */
enum {
    PYU_CHAIN_NULL = 1, /* at a frame whose previous is NULL */
    PYU_CHAIN_BASE,     /* at the thread's base frame (3.15) */
    PYU_CHAIN_STOP,     /* at stop_at, or the callback ended it */
    PYU_CHAIN_DEPTH,    /* after PYU_MAX_FRAMES frames */
    PYU_CHAIN_LOOP,     /* at a frame seen before */
    PYU_CHAIN_UNREAD,   /* at a frame that could not be read (quiet) */
};

/* One walk of a thread's chain, from `first` through each frame's
 * previous: where the frames' bytes are found, and how the walk ended. */
typedef struct pyu_chain_it {
    /* in */
    uint64_t first;
    uint64_t base;     /* 3.15: the chain ends at this frame; else 0 */
    uint64_t stop_at;  /* end after this frame, or 0 */
    const pyu_chunk_span *span; /* copies read beforehand (a sampler's
                                   snapshot), searched first */
    size_t nspan;
    uint64_t chunk;    /* the thread's current chunk: frames in no span
                          come from copies of the chunks (chunks.c) once
                          `singles` of them were read alone; 0: never */
    size_t singles;
    bool quiet;        /* a frame that cannot be read ends the walk
                          (PYU_CHAIN_UNREAD) without an error; the process
                          gone is still one */
    /* out */
    int end;           /* PYU_CHAIN_* */
    size_t n;          /* frames walked */
    size_t outside;    /* ... of them, found in no span */
    /* (private) */
    bool copying;
    int read_error;
} pyu_chain_it;

/* The one walk of a chain: calls fn(arg, frame, its bytes, how many bytes
 * of the copy follow the frame's start) for each frame, innermost first,
 * including shims; fn returns 0 to go on, 1 to end after this frame, -1 on
 * an error.  Returns 0, or -1 (record set). */
PYU_HIDDEN int pyu_chain_each(pyu_session *s, pyu_chain_it *it,
                              int (*fn)(void *arg, const pyu_frame_raw *f,
                                        const uint8_t *buf, size_t avail),
                              void *arg);

/* Decodes a copy of an interpreter frame at addr (fsize bytes): 1 and *f
 * filled (all but index) for a frame running Python code, 0 for a frame
 * with none (a shim, a C frame, an executable that is not code), -1 on an
 * error (record set). */
PYU_HIDDEN int pyu_frame_decode(pyu_session *s, uint64_t addr,
                                const uint8_t *buf, size_t fsize,
                                pyu_walk_frame *f);

/* One thread's chain of frames: what to walk, and what happened. */
typedef struct pyu_chain {
    /* in */
    uint64_t first;      /* current_frame */
    uint64_t base;       /* 3.15: the thread's base frame (the chain ends
                            there), else 0 */
    uint64_t chunk;      /* its current data-stack chunk */
    uint64_t watch;      /* a frame to look out for (the GC's), or 0 */
    uint64_t stop_at;    /* end the walk after this frame (a running
                            task's coroutine), or 0 */
    size_t index;        /* index of the first frame reported */
    bool entries;        /* report entry/shim frames too (owner
                            PYU_OWNER_ENTRY, not counted in index) */
    uint64_t cframe;     /* 3.11: the thread's innermost _PyCFrame (the
                            entry frames' stand-ins), or 0 */
    /* out */
    int truncated;       /* PYU_TRUNC_DEPTH / _LOOP */
    bool saw_watch, stopped;
    bool fn_ended;       /* fn returned fn_rc, not PYU_WALK_NEXT */
    int fn_rc;
} pyu_chain;

/* Walks the chain, calling fn for each Python frame (index set) until it
 * returns anything but PYU_WALK_NEXT (then fn_ended and fn_rc are set).
 * Returns 0 (also when fn ended it), or -1 on an error (record set). */
PYU_HIDDEN int pyu_chain_walk(pyu_session *s, pyu_chain *c,
                              int (*fn)(void *arg, const pyu_walk_frame *f),
                              void *arg);

/* ============================================ threads (threads.c) */

/* An interpreter state's fields the walks need. */
typedef struct pyu_interp {
    uint64_t addr;
    int64_t id;
    uint64_t next, threads_head, threads_main;
    uint64_t main_thread; /* 3.11: the runtime's main thread id */
    uint64_t gil_holder;  /* 3.11: the thread state holding the GIL, or 0 */
    bool gc_collecting;
    uint64_t gc_frame; /* 3.15: the frame that started the collection */
} pyu_interp;

/* A thread state's fields the walks need, taken from one copy of it. */
typedef struct pyu_tstate {
    uint64_t addr;
    uint64_t thread_id, native_id;
    bool main;
    bool holds_gil, gil_requested;
    uint64_t current_frame, base_frame, chunk;
    uint64_t cframe;                /* 3.11: its _PyCFrame */
    uint64_t outer_frame;           /* 3.11: the current frame of the loop
                                       that cframe's interrupted (its
                                       previous), read with cframe's
                                       word; 0 when not read */
    uint64_t outer_cf;              /* 3.11: ... that loop's cframe */
    bool loop_left;                 /* 3.11: cframe's previous named no
                                       loop then: its loop had ended (the
                                       two above are then of the loop
                                       last seen below it) */
    uint64_t ds_top;                /* its data stack's top (where
                                       the next frame would be pushed) */
    bool frame_unread;              /* ... which could not be read */
    uint64_t current_exception;
    uint64_t exc_info;              /* top of its handled-exception stack */
    bool exc_info_local;            /* ... which lies in the thread state:
                                       its two words follow */
    uint64_t exc_value, exc_previous;
    uint64_t extra[2];              /* the words at the caller's offsets */
} pyu_tstate;

typedef struct pyu_threads_cb {
    unsigned flags;          /* PYU_WALK_LIST_ORDER */
    uint64_t extra_off[2];   /* offsets of pyu_tstate.extra, PYU_ABSENT:
                                none */
    /* per interpreter, once its thread list is read: PYU_WALK_SKIP skips
     * its threads; other non-zero values stop */
    int (*interp)(void *arg, const pyu_interp *in, size_t nthreads,
                  bool threads_truncated, bool interps_truncated);
    int (*thread)(void *arg, const pyu_interp *in, const pyu_tstate *t);
    int (*interp_end)(void *arg, const pyu_interp *in, size_t nthreads,
                      bool threads_truncated, bool interps_truncated);
} pyu_threads_cb;

/* The one iterator over interpreters and their threads: reads the
 * interpreter list (noting each interpreter's code generation, which
 * flushes the caches when code objects were freed), then, interpreter by
 * interpreter, its thread states, and calls the callbacks in walk order.
 * Returns 0, a callback's stop value, or -1 on an error (record set). */
PYU_HIDDEN int pyu_threads_each(pyu_session *s, const pyu_threads_cb *cb,
                                void *arg);

/* The pieces of the iterator, for a caller that reads interpreters and
 * thread states in batches of its own (the sampler). */
typedef struct pyu_interp_read {
    uint64_t id, gen, tlbc_gen;
    int32_t collecting;
    uint64_t gil_holder, main_thread; /* (3.11: the runtime's) */
    int32_t gil_locked;
    pyu_range r[10]; /* point into this struct and the pyu_interp: up to 8
                        fields, and 2 more the iterator reads with them */
    size_t n;
    size_t nlocal;   /* the first nlocal lie in the interpreter state, the
                        rest in the runtime */
} pyu_interp_read;
/* The ranges that read the interpreter state at addr (and the runtime's
 * fields that stand for it, at runtime) into *ii and *ir. */
PYU_HIDDEN void pyu_interp_plan(const pyu_offsets *o, uint64_t runtime,
                                uint64_t addr,
                                pyu_interp *ii, pyu_interp_read *ir);
/* Completes *ii once the ranges are read (noting the code generation,
 * which may flush the caches). */
PYU_HIDDEN void pyu_interp_take(pyu_session *s, pyu_interp *ii,
                                const pyu_interp_read *ir);
/* The bytes of a thread state copy with the words at extra_off. */
PYU_HIDDEN size_t pyu_tstate_len(const pyu_session *s,
                                 const uint64_t extra_off[2]);
/* The _PyCFrame of the eval loop below the one whose cframe is at cf, and
 * its current frame, found on the thread's C stack (3.11, 3.12: for when
 * cf's loop had not linked its first frame yet, and its words lead
 * nowhere; threads.c says how).  ts: the thread state's address.
 * Returns whether one was found. */
PYU_HIDDEN bool pyu_cframe_above(pyu_session *s, uint64_t ts, uint64_t cf,
                                 uint64_t *below, uint64_t *word);
/* Decodes a copy of the thread state at ts into *r; *next gets the next
 * one of the list. */
/* A word read ahead at a predicted _PyCFrame (3.11): the current frame
 * it held. */
typedef struct pyu_peek {
    const uint64_t *cframe, *current_frame; /* n of each */
    size_t n;
} pyu_peek;
/* ... where the current frame is two loads away (3.11), it is read here,
 * unless peek (may be NULL) read it ahead at the cframe the copy names
 * (one of the peek's n cframes). */
PYU_HIDDEN void pyu_tstate_take(pyu_session *s, const pyu_interp *in,
                                const uint64_t extra_off[2], uint64_t ts,
                                const uint8_t *buf, size_t len, pyu_tstate *r,
                                uint64_t *next, const pyu_peek *peek);
PYU_HIDDEN void pyu_threads_free(pyu_session *s);

/* ============================================ compressed cores
 * (decompress.c) */

/* When the file open at fd is a zstd, xz, lz4 or gzip stream (told by
 * its first bytes), decompresses it into an unnamed temporary file and
 * sets *out to that file's descriptor (the caller closes it); otherwise
 * sets *out to -1.  Returns 0, or a negated error with err set (a stream
 * cut off or damaged, a full disk). */
PYU_HIDDEN int pyu_core_decompress(int fd, const char *path, int *out,
                                   pyu_err *err);

/* ============================================ thread status (status.c) */

/* PYU_STATUS_* of a thread (all but the 3.15 GC frame check, which needs
 * its frames).  The bits in `want` that cost reads (PYU_STATUS_ON_CPU, a
 * /proc read; PYU_STATUS_EXCEPTION) are looked up only when asked. */
PYU_HIDDEN unsigned pyu_status_of(pyu_session *s, const pyu_interp *in,
                                  const pyu_tstate *t, unsigned want);

/* ============================================= asyncio (asyncio.c) */

/* Finds and validates the .AsyncioDebug section once per session.
 * Returns 1 when found, 0 when no mapped file has it (asyncio not loaded),
 * -1 on an error (record set; PYU_E_VERSION before CPython 3.14). */
PYU_HIDDEN int pyu_aio_find(pyu_session *s);
/* Offsets (from a thread state) of its running loop and running task, for
 * pyu_threads_cb.extra_off. */
PYU_HIDDEN void pyu_aio_thread_fields(const pyu_session *s, uint64_t off[2]);
/* Where the task lists of a thread state / an interpreter start. */
PYU_HIDDEN uint64_t pyu_aio_thread_list(const pyu_session *s, uint64_t ts);
PYU_HIDDEN uint64_t pyu_aio_interp_list(const pyu_session *s,
                                        uint64_t interp);

/* What a task object holds. */
typedef struct pyu_aio_task {
    uint64_t addr;
    uint64_t name;        /* its name object */
    uint64_t coro;
    uint64_t awaited_by;  /* a task, a set of them, or 0 */
    bool awaited_by_is_set;
} pyu_aio_task;

/* Reads the task object at addr. */
PYU_HIDDEN int pyu_aio_task_read(pyu_session *s, uint64_t addr,
                                 pyu_aio_task *t);
/* Calls fn for each task on the circular list whose sentinel is at head
 * (list order), starting at *first when given (the head's next node, read
 * by the caller with other things), else reading it.  *truncated is set
 * when the list is longer than the limit, loops, or cannot be read to its
 * end.  Returns 0, fn's non-zero value, or -1 (record set). */
PYU_HIDDEN int pyu_aio_list(pyu_session *s, uint64_t head,
                            const uint64_t *first,
                            int (*fn)(void *arg, const pyu_aio_task *t),
                            void *arg, bool *truncated);
/* A task's name: a str, or "Task-N" for an int; *key names the text for
 * caching (the str's address, or the int's with the low bit set).  The
 * text is valid until the next call.  NULL on error. */
PYU_HIDDEN const char *pyu_aio_name(pyu_session *s, uint64_t name,
                                    uint64_t *key);
/* Calls fn for each frame of the coroutine chain starting at coro,
 * outermost first: the coroutine's own frame, then that of the coroutine
 * it awaits, and so on.  *cut is set when the chain is longer than
 * PYU_MAX_CORO_DEPTH.  Returns 0, fn's non-zero value, or -1. */
PYU_HIDDEN int pyu_aio_coro_chain(pyu_session *s, uint64_t coro,
                                  int (*fn)(void *arg, uint64_t frame,
                                            const uint8_t *buf, size_t len),
                                  void *arg, bool *cut);
/* The frame embedded in a coroutine object. */
PYU_HIDDEN uint64_t pyu_aio_coro_frame(const pyu_session *s, uint64_t coro);
/* Calls fn for each task awaiting t (at most PYU_MAX_AWAITERS; *cut when
 * there are more).  Returns 0, fn's non-zero value, or -1. */
PYU_HIDDEN int pyu_aio_awaiters(pyu_session *s, const pyu_aio_task *t,
                                int (*fn)(void *arg, uint64_t awaiter),
                                void *arg, bool *cut);
PYU_HIDDEN void pyu_aio_free(pyu_session *s);

/* ============================================ the walk (walk.c) */

/* (pyu_walk, pyu_frame_describe: public.)  The strings of a frame's code
 * object and their remote addresses, for results that copy them. */
PYU_HIDDEN const pyu_code *pyu_walk_code(pyu_session *s,
                                         const pyu_walk_frame *f);

/* ============================================ results (store.c) */

/* What a result (a dump, a task list) owns: copies of the target's strings
 * keyed by their remote address, error texts, and a memo of the names of
 * each code object it met.  Independent of the session, which may flush
 * its caches while the result is built. */
typedef struct pyu_store pyu_store;

PYU_HIDDEN pyu_store *pyu_store_new(void);
PYU_HIDDEN void pyu_store_free(pyu_store *st);
/* A copy of text, kept under key (a remote address; 0: always a new
 * copy).  NULL when out of memory. */
PYU_HIDDEN const char *pyu_store_str(pyu_store *st, uint64_t key,
                                     const char *text);
/* Fills *out for a frame a walk reported, with names copied into the
 * store (once per code object).  Returns 0 or -PYU_E_NOMEM (record set). */
PYU_HIDDEN int pyu_store_frame(pyu_store *st, pyu_session *s,
                               const pyu_walk_frame *f, pyu_frame *out);

/* ============================================ profiles (out_*.c) */

/* Captures (the raw format, writers/out_capture.c writes them,
 * profile/capture_read.c reads them): the file's first bytes and the
 * version written (1 to 3 are read too). */
#define PYU_CAPTURE_MAGIC "PYUNWRAW"
#define PYU_CAPTURE_VERSION 4

/* How many times a process of p was ended (pyu_profile_end_process): a
 * capture writes the ends when this moves. */
PYU_HIDDEN uint64_t pyu_profile_ends(const pyu_profile *p);
/* The process whose sample a sampler is taking (profile.c: the sampler
 * says it at each sample, a capture writes it with the sample), and that
 * process (-1 when no sampler said one). */
PYU_HIDDEN void pyu_profile_sampling(pyu_profile *p, uint32_t process);
PYU_HIDDEN long pyu_profile_sampled(const pyu_profile *p);

/* Whether filter f (NULL: everything) keeps a stack of thread t with
 * status `status` in a profile of mode profile_mode (profile.c; its
 * window aside). */
PYU_HIDDEN bool pyu_profile_keeps(const pyu_profile_filter *f,
                                  int profile_mode,
                                  const pyu_profile_thread *t,
                                  unsigned status);
/* Whether a profile of mode profile_mode can give mode `mode` (-1: its
 * own): its own, or wall narrowed to gil or exception. */
PYU_HIDDEN bool pyu_profile_can_narrow(int profile_mode, int mode);

/* The run's clock: the first call sets the profile's origin (and the
 * info's start_ns, when unset); pyu_profile_clock gives the nanoseconds
 * since that origin (CLOCK_MONOTONIC), for pyu_profile_mark. */
PYU_HIDDEN void pyu_profile_clock_start(pyu_profile *p);
PYU_HIDDEN uint64_t pyu_profile_clock(const pyu_profile *p);

/* One line: process, version, mode, samples, rate, failed, missed. */
PYU_HIDDEN void pyu_profile_summary(FILE *out, const pyu_profile_data *d);

/* pprof (out_pprof.c), with the process labels also for one process. */
PYU_HIDDEN int pyu_pprof_write(pyu_profile *p, FILE *out,
                               bool process_labels);
/* The time one sample stands for (ns): the schedule's period, or at -r
 * max the run's mean interval; 0 when unknown. */
PYU_HIDDEN uint64_t pyu_profile_period(const pyu_profile_info *pi);
/* The frames of stack `node`, outermost first, into *buf (grown as needed,
 * *cap its size).  Returns the depth, or -1 when out of memory. */
PYU_HIDDEN long pyu_profile_path(const pyu_profile_data *d, uint32_t node,
                                 uint32_t **buf, size_t *cap);
/* Writes len bytes of JSON as the body of an HTML <script> element ("</"
 * as the same JSON's "<\/", so that no string ends the element). */
PYU_HIDDEN void pyu_html_json(FILE *out, const char *json, size_t len);
/* "wall", "cpu", "gil", "exception" (PYU_MODE_*), or "?". */
PYU_HIDDEN const char *pyu_profile_mode_name(int mode);
/* "Thread NATIVE_ID (main thread)", "Thread NATIVE_ID (NAME)" or "Thread
 * NATIVE_ID": a profile thread's label in formats that name threads. */
PYU_HIDDEN void pyu_profile_thread_label(char *buf, size_t len,
                                         const pyu_profile_thread *t);
/* "pyunwind: PID N, CPython V, MODE mode": a profile's name in formats
 * that carry one. */
PYU_HIDDEN void pyu_profile_title(char *buf, size_t len,
                                  const pyu_profile_info *pi);
/* pyu_profile_title, or for a profile of several processes "pyunwind: N
 * processes, CPython V[, V2...], MODE mode". */
PYU_HIDDEN void pyu_profile_name(char *buf, size_t len,
                                 const pyu_profile_data *d);
/* The CPython versions of d's processes, each once, ", " between them. */
PYU_HIDDEN void pyu_profile_versions(const pyu_profile_data *d, char *buf,
                                     size_t len);
/* "pid N (COMMAND)", or "pid N" when its command line is unknown: a
 * process in formats that name the processes of a profile. */
PYU_HIDDEN void pyu_profile_process_label(char *buf, size_t len,
                                          const pyu_profile_process *pr);

/* ================================================= JSON (json.c) */

/* A JSON string (always valid UTF-8; bytes that are not as \udcXX). */
PYU_HIDDEN void pyu_json_str(FILE *out, const char *s);

/* The sink that prints JSON text (pyu_json_sink): ", " between values,
 * ": " after keys, PYU_JSON_ROWS arrays one element a line indented by
 * two spaces a level, a newline after the outermost value. */
#define PYU_JSON_DEPTH 16 /* containers open at once (the dump needs 7) */
typedef struct pyu_json_text {
    FILE *out;
    unsigned depth, rows; /* containers open; PYU_JSON_ROWS ones */
    bool keyed;           /* a key was written: its value comes next */
    struct {
        unsigned n, layout; /* values written in it; its layout */
    } level[PYU_JSON_DEPTH];
} pyu_json_text;
PYU_HIDDEN pyu_json_sink pyu_json_text_sink(pyu_json_text *t, FILE *out);

/* Describing to a sink: each call does nothing once one has failed (rc
 * holds the sink's error); key names the value in the object around it,
 * NULL in an array.  A NULL string is null. */
typedef struct pyu_json_out {
    const pyu_json_sink *sink;
    int rc;
} pyu_json_out;
PYU_HIDDEN void pyu_jo_open(pyu_json_out *o, const char *key, char kind,
                            unsigned layout);
PYU_HIDDEN void pyu_jo_close(pyu_json_out *o, char kind);
PYU_HIDDEN void pyu_jo_str(pyu_json_out *o, const char *key, const char *s);
PYU_HIDDEN void pyu_jo_int(pyu_json_out *o, const char *key, int64_t v);
PYU_HIDDEN void pyu_jo_uint(pyu_json_out *o, const char *key, uint64_t v);
PYU_HIDDEN void pyu_jo_bool(pyu_json_out *o, const char *key, int v);
PYU_HIDDEN void pyu_jo_null(pyu_json_out *o, const char *key);
/* The "pid" and "python" members that begin a dump's and a task list's
 * object, and the "signal" one that ends them. */
PYU_HIDDEN void pyu_jo_process_head(pyu_json_out *o, const pyu_process *p);
PYU_HIDDEN void pyu_jo_process_signal(pyu_json_out *o, const pyu_process *p);

/* ============================================ dumps written (out_dump.c) */

/* A frame object of the dump's and the tasks' JSON. */
PYU_HIDDEN void pyu_jo_frame(pyu_json_out *o, const pyu_frame *f);

/* ======================== a target's source files (writers/source_file.c) */

/* pyu_source_read's work: path below root, then as it is; whether it
 * changed after p's source time (p may be NULL); stat_only: its time
 * only, not its text (0 then when found). */
PYU_HIDDEN int pyu_source_load(const char *root, const char *path,
                               const pyu_process *p, bool stat_only,
                               pyu_source *out);

/* ====================== a frame's source lines (writers/source_lines.c) */

/* Writes the source lines of a frame as CPython 3.<minor>'s traceback
 * module writes them under a frame's "  File ..., line N, in F" line
 * (StackSummary.format_frame_summary, without colour): the source line
 * or lines, and the carets under the running expression where that
 * version shows them.  text (len bytes, UTF-8, need not end in a
 * newline) is the whole source file; line and end_line are 1-based,
 * col and end_col 0-based UTF-8 byte offsets, as co_positions gives
 * them; end_line 0 and col/end_col -1 when unknown (then the stripped
 * line alone, as a frame without positions).  Writes nothing when line
 * is not in text or line <= 0.  version: the target's minor * 100 +
 * micro (1201 for 3.12.1; micro versions of 3.11 and 3.12 format
 * carets differently), or the minor version alone (its first micro
 * version's rules). */
PYU_HIDDEN void pyu_source_lines(FILE *out, const char *text, size_t len,
                                 int version, int line, int end_line,
                                 int col, int end_col);

#endif
