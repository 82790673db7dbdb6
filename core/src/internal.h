/* Private declarations of the pyunwind core. */
#ifndef PYUNWIND_INTERNAL_H
#define PYUNWIND_INTERNAL_H

#include "pyunwind/pyunwind.h"

#include <stdarg.h>
#include <stdbool.h>

#define PYU_HIDDEN __attribute__((visibility("hidden")))
#define PYU_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ================================================================ limits */

#define PYU_MAX_INTERPRETERS 256
#define PYU_MAX_GENERATIONS 8   /* interpreters whose code epochs we track */
#define PYU_MAX_CODES 65536     /* cached code objects before starting over */
#define PYU_MAX_THREADS 16384
#define PYU_MAX_FRAMES 65536    /* per thread */
#define PYU_MAX_STRING 65536    /* characters of a name or file name */
#define PYU_MAX_LINETABLE (1u << 22)
#define PYU_MAX_SECTION (1u << 24) /* a struct size in the offsets table */

/* ================================================================ errors */

#define PYU_ERRMSG_MAX 1024

typedef struct pyu_err {
    int code;                  /* enum pyu_error, positive */
    char msg[PYU_ERRMSG_MAX];
} pyu_err;

/* What to do about a refused read of a live process. */
#define PYU_PERM_REMEDY                                                      \
    "run pyunwind as the target's user with ptrace allowed "                 \
    "(sysctl kernel.yama.ptrace_scope=0), or as root / with CAP_SYS_PTRACE"

/* Sets the error (replacing any previous one); returns -code. */
PYU_HIDDEN int pyu_err_set(pyu_err *e, int code, const char *fmt, ...)
    PYU_PRINTF(3, 4);
/* Prefixes "context: " to the current message; returns -code. */
PYU_HIDDEN int pyu_err_ctx(pyu_err *e, const char *fmt, ...) PYU_PRINTF(2, 3);

/* ====================================================== memory back ends */

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

/* ===================================================== ELF files on disk */

typedef struct pyu_elf_info {
    bool has_pyruntime;      /* a .PyRuntime section */
    uint64_t pyruntime_vaddr;
    bool has_symbol;         /* a _PyRuntime dynamic symbol */
    uint64_t symbol_vaddr;
    uint64_t base_vaddr;     /* first PT_LOAD p_vaddr, rounded down */
    bool has_asyncio;        /* an .AsyncioDebug section (3.14+) */
    uint64_t asyncio_vaddr, asyncio_size;
} pyu_elf_info;

/* Reads the section headers and dynamic symbols of the ELF file at path.
 * Returns 0 or a negated error (message in err). */
PYU_HIDDEN int pyu_elf_inspect(const char *path, pyu_elf_info *info,
                               pyu_err *err);
/* Calls libelf's elf_version once. */
PYU_HIDDEN bool pyu_elf_init(void);

/* ========================================================= debug offsets */

#define PYU_OFFSET_FIELDS(X)                                                 \
    X(rt_size) X(rt_finalizing) X(rt_interpreters_head)                      \
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
    X(err_exc_value)                                                         \
    X(fr_size) X(fr_previous) X(fr_executable) X(fr_instr_ptr)               \
    X(fr_localsplus) X(fr_owner) X(fr_stackpointer) X(fr_tlbc_index)         \
    X(co_size) X(co_filename) X(co_name) X(co_qualname) X(co_linetable)      \
    X(co_firstlineno) X(co_argcount) X(co_localsplusnames)                   \
    X(co_localspluskinds) X(co_code_adaptive) X(co_tlbc)                     \
    X(ob_size) X(ob_type)                                                    \
    X(tp_size) X(tp_name) X(tp_repr) X(tp_flags) X(tp_basicsize)             \
    X(tp_dictoffset)                                                         \
    X(ht_size) X(ht_cached_keys)                                             \
    X(tuple_size) X(tuple_ob_item) X(tuple_ob_size)                          \
    X(list_size) X(list_ob_item) X(list_ob_size)                             \
    X(set_size) X(set_used) X(set_table) X(set_mask)                         \
    X(dict_size) X(dict_ma_keys) X(dict_ma_values)                           \
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

/* The offsets of one target, normalised across versions. */
typedef struct pyu_offsets {
    uint64_t v[PYU_F_COUNT];
    uint64_t version_hex;
    int minor;          /* 13, 14, 15 */
    bool free_threaded;
    uint64_t tag_mask;  /* low bits to clear in a _PyStackRef */
    unsigned str_kind_shift; /* bit position of `kind` in the state word */
} pyu_offsets;

#define PYU_OFF(o, f) ((o)->v[PYU_F_##f])
#define PYU_HAS(o, f) ((o)->v[PYU_F_##f] != PYU_ABSENT)

/* Reads and validates the table at runtime_addr (the cookie already
 * checked).  Returns 0 or a negated error naming what is wrong. */
PYU_HIDDEN int pyu_offsets_read(pyu_session *s, uint64_t runtime_addr,
                                pyu_offsets *out);
/* "3.14.7", "3.15.0b4" */
PYU_HIDDEN void pyu_version_string(uint64_t hex, char *out, size_t outlen);
/* The field ids of a version's table in order (n of them), or NULL when
 * the layout is unknown. */
PYU_HIDDEN const uint8_t *pyu_offsets_layout(uint64_t version_hex, size_t *n);
/* Number of uint64 fields of a version's table after the 24-byte prefix,
 * or 0 when the layout is unknown (tests use it). */
PYU_HIDDEN size_t pyu_offsets_layout_fields(uint64_t version_hex);

/* ============================================================= the session */

/* A cached code object: what frames need, decoded once. */
typedef struct pyu_code {
    uint64_t addr;       /* 0: empty slot */
    bool stale;          /* reading it failed part-way: read it again */
    const char *qualname; /* interned in the session's string table */
    const char *name;
    const char *filename;
    uint64_t str_addr[3]; /* remote addresses of qualname, name, filename */
    uint8_t *linetable;   /* owned */
    uint32_t linetable_len;
    int firstlineno;
    uint64_t tlbc_array;  /* address of co_tlbc (free-threaded), or 0 */
    int32_t tlbc_memo_index; /* last thread-local bytecode looked up */
    uint64_t tlbc_memo_base;
    /* one-entry memo of the last index -> line lookup */
    uint64_t memo_index;
    int memo_line;
    /* the copies of the names made for dump number dump_serial */
    uint64_t dump_serial;
    const char *dump_qualname, *dump_name, *dump_filename;
} pyu_code;

typedef struct pyu_strtab pyu_strtab;

/* Local copies of a thread's data-stack chunks, where its frames live, so
 * that a walk reads each chunk once instead of each frame.  The buffer is
 * the session's and is reused from walk to walk. */
#define PYU_MAX_CHUNKS 64
#define PYU_MAX_CHUNK_BYTES (32u << 20) /* copied per thread at most */

typedef struct pyu_stackview {
    uint8_t *buf; /* owned */
    size_t cap, used;
    struct {
        uint64_t start, end; /* remote range [start, end) */
        size_t at;           /* its copy is buf + at */
    } chunk[PYU_MAX_CHUNKS];
    size_t n;
    uint64_t next; /* remote address of the next chunk to copy, or 0 */
    uint64_t first_end; /* end of the innermost frame: the first chunk is
                           copied up to it */
} pyu_stackview;

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

    /* caches */
    pyu_code *codes;     /* open addressing, power-of-two size */
    size_t ncodes_cap;
    size_t ncodes;
    uint64_t dump_serial; /* dumps taken so far */
    uint64_t guess_interp, guess_tstate; /* first ones of the last dump */
    struct {
        uint64_t interp, gen; /* code_object_generation last seen */
    } generations[PYU_MAX_GENERATIONS];
    uint64_t type_yes[8];     /* type objects known to be `code` */
    uint64_t type_no[32];     /* type objects known not to be */
    unsigned type_no_next;
    pyu_strtab *strings;  /* remote str address -> decoded UTF-8 */
    pyu_stackview stack;  /* scratch for frame walks */
    uint64_t aio_addr;    /* .AsyncioDebug, once found and validated */
    uint64_t aio[13];     /* its contents */
};

/* Reads len bytes at addr; on failure sets the session error with the
 * given context ("reading X at 0x..."). */
PYU_HIDDEN int pyu_read(pyu_session *s, uint64_t addr, void *buf, size_t len,
                        const char *what);
/* Several ranges in one call of the back end. */
PYU_HIDDEN int pyu_readv(pyu_session *s, const pyu_range *r, size_t n,
                         const char *what);

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

/* Locates _PyRuntime (section, symbol, then scan) and reads its offsets.
 * hint: a known address, or 0. */
PYU_HIDDEN int pyu_runtime_find(pyu_session *s, uint64_t hint);

/* ===================================================== strings and code */

/* Reads the str object at addr and returns its UTF-8 text, interned in the
 * session (valid until the session's caches are flushed).  NULL on error
 * (session error set). */
PYU_HIDDEN const char *pyu_str_read(pyu_session *s, uint64_t addr);
/* Returns the cached code object at addr, reading it on a miss; NULL with
 * the session error set when addr is not a readable code object.  *is_code
 * is false (and NULL returned without error) when the object is valid but
 * not a code object. */
PYU_HIDDEN const pyu_code *pyu_code_get(pyu_session *s, uint64_t addr,
                                        bool *is_code);
/* The line of the instruction at instr_ptr in a frame of code c. */
PYU_HIDDEN int pyu_code_line(pyu_session *s, const pyu_code *c,
                             uint64_t instr_ptr, int32_t tlbc_index);
/* Drops the code and string caches. */
PYU_HIDDEN void pyu_caches_flush(pyu_session *s);

/* Runs fn with the target stopped (when the memory source can stop it) and
 * lets it run again.  Returns 0, or the negated code of the error fn (or
 * stopping) recorded. */
PYU_HIDDEN int pyu_paused(pyu_session *s, int (*fn)(pyu_session *, void *),
                          void *arg);

/* An interpreter state's fields the walks need.  Reading one also notes its
 * code_object_generation, flushing the caches when code was freed. */
typedef struct interp_info {
    int64_t id;
    uint64_t next, threads_head, threads_main;
    bool gc_collecting;
    uint64_t gc_frame; /* 3.15: the frame that started the collection */
} interp_info;
PYU_HIDDEN int pyu_interp_read(pyu_session *s, uint64_t interp,
                               interp_info *ii, const pyu_range *extra,
                               size_t nextra);
/* The dump takes ownership of t (strings its frames now point to). */
PYU_HIDDEN void pyu_dump_keep_tasks(pyu_dump *d, pyu_tasks *t);
/* JSON pieces shared by the renderers: a string (always valid UTF-8; other
 * bytes as \udcXX), a frame object. */
PYU_HIDDEN void pyu_json_str(FILE *out, const char *s);
PYU_HIDDEN void pyu_json_frame(FILE *out, const pyu_frame *f);
/* A string or null; the "signal" member and the end of the top object. */
PYU_HIDDEN void pyu_json_opt_str(FILE *out, const char *s);
PYU_HIDDEN void pyu_json_signal_end(FILE *out, int signo, uint64_t tid);
PYU_HIDDEN int pyu_frame_fill(pyu_session *s, pyu_strtab *strings,
                              const uint8_t *buf, size_t fsize, pyu_frame *f);
PYU_HIDDEN void pyu_caches_free(pyu_session *s);

PYU_HIDDEN pyu_strtab *pyu_strtab_new(void);
PYU_HIDDEN void pyu_strtab_free(pyu_strtab *t);
PYU_HIDDEN const char *pyu_strtab_get(const pyu_strtab *t, uint64_t key);
PYU_HIDDEN const char *pyu_strtab_put(pyu_strtab *t, uint64_t key,
                                      const char *text, size_t len);

#endif
