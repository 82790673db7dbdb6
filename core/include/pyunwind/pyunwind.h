/* pyunwind: read the Python call stacks of a CPython process from outside.
 *
 * The library reads memory of a target (a live process, an ELF core file, or
 * anything a caller can read memory of, such as a debugger's inferior),
 * locates CPython's _PyRuntime, reads the _Py_DebugOffsets table CPython 3.13
 * and later publish at its start, and walks interpreters, threads and frames
 * with those offsets.  It never writes to the target.
 *
 * Usage:
 *     pyu_session *s = pyu_session_new();
 *     if (pyu_open_pid(s, pid, 0) < 0) { puts(pyu_errmsg(s)); ... }
 *     pyu_dump *d;
 *     if (pyu_dump_take(s, 0, &d) < 0) { ... }
 *     pyu_dump_write_text(d, stdout, 0);
 *     pyu_dump_free(d);
 *     pyu_session_free(s);
 *
 * Conventions: functions that can fail return 0 (or a count) on success and a
 * negative pyu_error code on failure; the session then holds a one-line
 * message (pyu_errmsg) naming what failed and, where there is one, the
 * remedy.  Every pointer read from the target is treated as untrusted and
 * every walk is bounded.
 */
#ifndef PYUNWIND_PYUNWIND_H
#define PYUNWIND_PYUNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PYU_API __attribute__((visibility("default")))
#else
#define PYU_API
#endif

/* ------------------------------------------------------------------ errors */

/* Error codes.  Functions return the negated code (-PYU_E_READ, ...). */
#define PYU_ERRORS(X)                                                       \
    X(OK, "no error")                                                       \
    X(NOMEM, "out of memory")                                               \
    X(INVAL, "invalid argument")                                            \
    X(NOPROC, "no such process")                                            \
    X(PERM, "permission denied")                                            \
    X(FAULT, "address not readable")                                        \
    X(IO, "input/output error")                                             \
    X(BADCORE, "not a usable core file")                                    \
    X(NOTPY, "no CPython runtime found")                                    \
    X(VERSION, "unsupported CPython version")                               \
    X(OFFSETS, "invalid debug offsets table")                               \
    X(CORRUPT, "inconsistent target memory")                                \
    X(STATE, "operation not valid in this state")                           \
    X(NOTFOUND, "no such name")

enum pyu_error {
#define PYU_ENUM_(name, text) PYU_E_##name,
    PYU_ERRORS(PYU_ENUM_)
#undef PYU_ENUM_
    PYU_E_COUNT_
};

/* Short fixed text for an error code (positive or negated). Never NULL. */
PYU_API const char *pyu_strerror(int code);

/* ---------------------------------------------------------- memory sources */

/* One range to read: len bytes at target address addr into buf. */
typedef struct pyu_range {
    uint64_t addr;
    void *buf;
    size_t len;
} pyu_range;

/* One mapping of the target's address space, [start, end). */
typedef struct pyu_mapping {
    uint64_t start;
    uint64_t end;
    uint64_t offset;  /* offset in the backing file of `start` */
    unsigned prot;    /* PYU_PROT_* bits */
    const char *path; /* backing file as the target names it, or NULL for
                         anonymous memory; borrowed, valid during the call */
} pyu_mapping;

#define PYU_PROT_READ 1u
#define PYU_PROT_WRITE 2u
#define PYU_PROT_EXEC 4u

typedef int (*pyu_mapping_fn)(void *arg, const pyu_mapping *m);

/* A native (machine code) frame of a thread, as an unwinder found it. */
typedef struct pyu_native_frame {
    uint64_t pc;        /* where it runs; a caller's is its return address */
    uint64_t sp;        /* its stack pointer; 0 when unknown */
    const char *symbol; /* the function's name, or NULL when none is known */
    uint64_t offset;    /* pc less the function's start (with symbol) */
    const char *module; /* path of the file mapped at pc, or NULL */
} pyu_native_frame;

typedef int (*pyu_native_fn)(void *arg, const pyu_native_frame *f);

/* A memory source: a table of callbacks over an opaque context.
 *
 * read      Required.  Reads every range completely.  Returns 0 when all
 *           ranges were read, or a negated error: -PYU_E_FAULT when some
 *           address is not mapped or not present (a page missing from a
 *           core), -PYU_E_NOPROC when the process is gone, -PYU_E_PERM when
 *           access is refused, -PYU_E_IO otherwise.  Buffers of failed
 *           ranges have unspecified contents.
 * mappings  May be NULL (the runtime can then only be found with the
 *           debugger-supplied hint, see pyu_open_memory).  Calls fn for each
 *           mapping in ascending address order; stops early when fn returns
 *           non-zero and returns that value; returns 0 or a negated error.
 * file_path May be NULL (paths are used as they are).  Translates the path a
 *           mapping names into a path of the same file readable here (a
 *           sysroot, /proc/PID/root, a replacement executable).  Writes a
 *           NUL-terminated path into out (size outlen) and returns 0, or
 *           returns a negated error when there is none.
 * pause     May be NULL.  Stops the target so that a read sees one consistent
 *           state; returns 0 or a negated error.  Every successful pause is
 *           followed by exactly one resume.
 * resume    May be NULL when pause is.  Lets the target run again.
 * thread_state May be NULL.  Writes the scheduler state letter of native
 *           thread tid ('R' running, 'S' sleeping, ...) and returns 0, or
 *           returns a negated error when unknown.
 * fatal_signal May be NULL.  When the target was stopped by a signal (a
 *           core the kernel wrote), stores the signal and the kernel thread
 *           it was delivered to and returns 0; otherwise returns
 *           -PYU_E_STATE.
 * destroy   May be NULL.  Frees ctx; called once, by pyu_session_free.
 * write     May be NULL (the target cannot be written).  Writes len bytes
 *           at addr.  The one write pyunwind makes is the sampler's frame
 *           cache anchor on CPython 3.15 (see pyu_sampler_new); returns 0
 *           or a negated error as read does.
 * thread_name May be NULL.  Writes the kernel's name of native thread tid
 *           (NUL-terminated, into out of size outlen; on Linux its comm,
 *           which CPython 3.14+ sets to the threading.Thread's name, cut
 *           at 15 bytes) and returns 0, or returns a negated error.
 * native_frames May be NULL (no native stacks).  Calls fn for each native
 *           frame of native thread tid, innermost first (the strings are
 *           valid during the call), while the target is paused; stops
 *           when fn returns non-zero and returns that value.  Returns 0,
 *           or a negated error with why (size whylen) saying why in one
 *           line.
 * thread_cpu May be NULL.  Writes the CPU that native thread tid runs
 *           on, or last ran on, and returns 0, or returns a negated error
 *           when unknown (a sampler's run moves itself there: see
 *           pyu_sampler_cpu).
 * source_time May be NULL.  Stores the time (seconds since the epoch)
 *           after which a source file may no longer hold what the target
 *           runs: a live process's start (*core 0), the writing of a core
 *           file (*core 1); returns 0, or a negated error when unknown.
 */
typedef struct pyu_memory_ops {
    int (*read)(void *ctx, const pyu_range *ranges, size_t nranges);
    int (*mappings)(void *ctx, pyu_mapping_fn fn, void *arg);
    int (*file_path)(void *ctx, const char *mapped, char *out, size_t outlen);
    int (*pause)(void *ctx);
    int (*resume)(void *ctx);
    int (*thread_state)(void *ctx, uint64_t tid, char *state);
    int (*fatal_signal)(void *ctx, int *signo, uint64_t *tid);
    void (*destroy)(void *ctx);
    int (*write)(void *ctx, uint64_t addr, const void *buf, size_t len);
    int (*thread_name)(void *ctx, uint64_t tid, char *out, size_t outlen);
    int (*native_frames)(void *ctx, uint64_t tid, pyu_native_fn fn,
                         void *arg, char *why, size_t whylen);
    int (*source_time)(void *ctx, int64_t *sec, int *core);
    int (*thread_cpu)(void *ctx, uint64_t tid, int *cpu);
} pyu_memory_ops;

/* ---------------------------------------------------------------- sessions */

typedef struct pyu_session pyu_session;

/* A new, unopened session, or NULL when out of memory. */
PYU_API pyu_session *pyu_session_new(void);

/* Frees the session and everything it owns (its memory source included).
 * Accepts NULL and sessions whose open failed. */
PYU_API void pyu_session_free(pyu_session *s);

/* The last error of the session as one line ("" when none). Valid until the
 * next call on the session. */
PYU_API const char *pyu_errmsg(const pyu_session *s);

/* The last error code of the session (a positive enum pyu_error). */
PYU_API int pyu_errcode(const pyu_session *s);

/* Flags for pyu_open_pid. */
#define PYU_OPEN_NONBLOCKING 1u /* never stop the process to read it */
#define PYU_OPEN_NO_CPU_STATE 2u /* skip the on-CPU status (one /proc read
                                    per thread; samplers do without it) */

/* Opens a live local process by pid: memory through process_vm_readv
 * (/proc/PID/mem when the system call is refused), mappings from
 * /proc/PID/maps.  Unless PYU_OPEN_NONBLOCKING, reads that need a consistent
 * view (pyu_dump_take) stop the process with ptrace for their duration and
 * let it run again afterwards.  Locates the runtime and validates its
 * offsets.  Returns 0 or a negated error. */
PYU_API int pyu_open_pid(pyu_session *s, int pid, unsigned flags);

/* The live process pid and its descendants as they are now (its children,
 * theirs, ...): pids[0] = pid, then depth first, each process before its
 * children, siblings by pid; at most max of them.  Read from /proc (each
 * process's parent), without touching any process.  Returns how many were
 * written, or -PYU_E_NOPROC when pid does not exist. */
PYU_API int pyu_process_tree(int pid, int *pids, size_t max);

/* A process tree watched as it grows (sample --subprocesses): the roots
 * and every process whose parent was in the tree when the process was
 * first seen -- it stays in the tree when that parent exits.  Each scan
 * lists /proc and reads the parent of the processes it has not seen
 * before only, so that scanning every few milliseconds costs little; it
 * touches no process (no tracing).  NULL when out of memory. */
typedef struct pyu_proc_watch pyu_proc_watch;
PYU_API pyu_proc_watch *pyu_proc_watch_new(const int *roots, size_t n);
/* Scans: the processes that joined the tree since the last scan (the
 * roots at the first) into pids, parents before children, at most max
 * (the rest come with the next scan).  Returns how many, or -PYU_E_IO
 * (/proc cannot be listed) or -PYU_E_NOMEM. */
PYU_API int pyu_proc_watch_scan(pyu_proc_watch *w, int *pids, size_t max);
/* How many processes of the tree the last scan found alive. */
PYU_API size_t pyu_proc_watch_alive(const pyu_proc_watch *w);
PYU_API void pyu_proc_watch_free(pyu_proc_watch *w);

/* Opens an ELF core file.  exe (may be NULL) replaces the executable the
 * core names; sysroot (may be NULL) is prefixed to every file the core
 * names.  Pages the kernel left out of the core are read from those files.
 * Returns 0 or a negated error. */
PYU_API int pyu_open_core(pyu_session *s, const char *core, const char *exe,
                          const char *sysroot);

/* Opens a caller-supplied memory source.  The session takes ownership of
 * ctx (ops->destroy is called by pyu_session_free, also when this open
 * fails).  pid is reported in dumps (0 when unknown).  runtime_hint is the
 * address of _PyRuntime when the caller knows it (from a symbol table), or
 * 0 to search the mappings.  The ops table must outlive the session. */
PYU_API int pyu_open_memory(pyu_session *s, const pyu_memory_ops *ops,
                            void *ctx, int pid, uint64_t runtime_hint);

/* Native stacks from the caller's own unwinder (a debugger's) instead of
 * the memory source's native_frames: fn is called as that op would be,
 * with arg as its first argument.  NULL goes back to the source's. */
typedef int (*pyu_native_frames_fn)(void *arg, uint64_t tid,
                                    pyu_native_fn fn, void *fn_arg,
                                    char *why, size_t whylen);
PYU_API void pyu_set_native_frames(pyu_session *s, pyu_native_frames_fn fn,
                                   void *arg);

/* The version (PY_VERSION_HEX, the target's Py_Version) of a CPython
 * without debug offsets (3.11), when the caller knows it: a debugger that
 * reads the Py_Version symbol.  Call before pyu_open_memory; it lets the
 * runtime hint, and a runtime found by a scan, be read without the
 * target's files.  0 forgets it. */
PYU_API void pyu_set_version_hint(pyu_session *s, uint64_t version_hex);

/* The version (PY_VERSION_HEX) of the CPython whose executable or
 * libpython is the ELF file at path, as a reader without debug offsets
 * needs it: its Py_Version (3.11+), else the PY_VERSION string in its
 * read-only data (3.9, 3.10; the release level is taken as final).  For a
 * debugger whose module has no Py_Version symbol, to give
 * pyu_set_version_hint.  Returns 0 and sets *version_hex, or
 * -PYU_E_IO (not a readable ELF file) or -PYU_E_NOTPY (no version in
 * it). */
PYU_API int pyu_file_python_version(const char *path, uint64_t *version_hex);

/* The target's CPython, once opened. */
typedef struct pyu_python_info {
    uint64_t runtime_addr; /* address of _PyRuntime */
    uint64_t version_hex;  /* PY_VERSION_HEX */
    const char *found_in;  /* file that holds _PyRuntime, or "" (owned by
                              the session) */
} pyu_python_info;

/* Fills *info; returns 0, or -PYU_E_STATE before a successful open. */
PYU_API int pyu_python(const pyu_session *s, pyu_python_info *info);

/* Which process and which Python: what a dump, a task list and a profile
 * say of their target, and what pyu_target() says of an opened one. */
typedef struct pyu_process {
    int pid;                /* its process id (0 when unknown) */
    int signal;             /* the signal that killed it (a core the kernel
                               wrote), or 0 */
    uint64_t signal_thread; /* the kernel thread that received it */
    char python[32];        /* its CPython's version ("3.14.7",
                               "3.15.0b4"), or "" */
    int free_threaded;      /* a free-threaded build */
    int64_t source_time;    /* seconds since the epoch after which its
                               source files may have changed under it (the
                               memory source's source_time), or 0 */
    int source_time_core;   /* source_time is when the core was written,
                               not when the process started */
} pyu_process;

/* Fills *out; returns 0, or -PYU_E_STATE before a successful open. */
PYU_API int pyu_target(const pyu_session *s, pyu_process *out);

/* ----------------------------------------------------------------- walking */

/* The walk reads every interpreter, thread and frame of the target and
 * calls the caller once for each, in the manner of libdwfl's
 * dwfl_getthreads / dwfl_thread_getframes.  Dumps, task lists, the debugger
 * plugins and samplers are all callers of it.
 *
 * Order: interpreters by ascending id; within one, its threads oldest
 * first with the main thread first (PYU_WALK_LIST_ORDER: both as the
 * runtime lists them, newest first); a thread's frames innermost first.
 * For each interpreter: interpreter(), then for each of its threads
 * thread(), frame() for each frame (task() where a task begins, with
 * PYU_WALK_ASYNC), thread_end(); then interpreter_end().
 *
 * Return values of the callbacks: PYU_WALK_NEXT goes on.  PYU_WALK_SKIP
 * skips what the callback's object holds and goes on with the next one: an
 * interpreter's threads (interpreter_end is still called), a thread's
 * frames (thread_end is not called), the rest of a thread's frames (frame,
 * task: thread_end is called).  Any other value stops the walk at once and
 * pyu_walk returns it: use values above PYU_WALK_SKIP, or negated
 * pyu_error codes.
 *
 * Lifetime: every struct a callback receives, and every string reachable
 * from it, is borrowed for the duration of that call.  Nothing is
 * allocated per frame once the code objects a walk meets are cached. */

#define PYU_WALK_NEXT 0
#define PYU_WALK_SKIP 1

/* Flags for pyu_walk / pyu_dump_take. */
#define PYU_WALK_ASYNC 1u      /* a thread running an asyncio task: its
                                  frames end at the task's coroutine and go
                                  on with the coroutine stacks of the tasks
                                  awaiting it (the first awaiter of each, up
                                  to 1024 tasks); CPython 3.14+ */
#define PYU_WALK_LIST_ORDER 2u /* threads and interpreters as the runtime
                                  lists them (newest first) */
#define PYU_WALK_LOCALS 4u     /* pyu_dump_take: each frame's arguments and
                                  local variables (pyu_frame.locals); the
                                  walk itself ignores it */
#define PYU_WALK_ENTRY_FRAMES 8u /* also report the interpreter's entry
                                  frames (owner PYU_OWNER_ENTRY, code_addr
                                  0): each follows the Python frames one
                                  call of the eval loop runs, and lives on
                                  that call's native stack */
#define PYU_WALK_NATIVE 16u    /* pyu_dump_take: each thread's native stack
                                  (pyu_thread.native), the Python frames
                                  placed in the eval loop's native frames
                                  that run them */

/* Why a thread's frames stop before its oldest frame (pyu_walk_end and
 * pyu_thread.truncated). */
#define PYU_TRUNC_NONE 0
#define PYU_TRUNC_DEPTH 1 /* deeper than the frame limit (65536) */
#define PYU_TRUNC_LOOP 2  /* the frame chain loops */
#define PYU_TRUNC_TASKS 3 /* PYU_WALK_ASYNC: more awaiting tasks than the
                             limit (1024), or their chain loops */

/* Thread status bits. */
#define PYU_STATUS_HAS_GIL 0x01u       /* holds the GIL */
#define PYU_STATUS_GIL_REQUESTED 0x02u /* waiting for the GIL */
#define PYU_STATUS_ON_CPU 0x04u        /* scheduled on a CPU (live only) */
#define PYU_STATUS_GC 0x08u            /* running the garbage collector */
#define PYU_STATUS_EXCEPTION 0x10u     /* raising or handling an exception */

typedef struct pyu_walk_interp {
    int64_t id;
    uint64_t addr;            /* its PyInterpreterState */
    size_t nthreads;          /* threads the walk reports for it */
    int threads_truncated;    /* its thread list is longer than the limit
                                 (16384), loops, or cannot be read past
                                 nthreads */
    int interpreters_truncated; /* the runtime's list of interpreters is
                                   longer than the limit (256) or loops:
                                   the same for every interpreter */
} pyu_walk_interp;

typedef struct pyu_walk_thread {
    int64_t interpreter_id;
    uint64_t addr;             /* its PyThreadState */
    uint64_t thread_id;        /* threading.get_ident() */
    uint64_t native_thread_id; /* kernel thread id */
    int main;                  /* the interpreter's main thread */
    unsigned status;           /* PYU_STATUS_*, as known before its frames
                                  are read (see pyu_walk_end.status) */
} pyu_walk_thread;

/* A frame: compact, stable identities.  Names, file and line are resolved
 * on request (pyu_frame_describe) from the session's caches. */
typedef struct pyu_walk_frame {
    uint64_t addr;      /* the interpreter frame */
    uint64_t code_addr; /* its code object */
    uint32_t instr;     /* index (in code units) of its current instruction
                           in the code's bytecode; PYU_INSTR_UNKNOWN when
                           it points elsewhere */
    uint8_t owner;      /* PYU_OWNER_* */
    size_t index;       /* 0 for the innermost frame of the thread, then
                           1, 2, ... (frames of awaiting tasks included) */
    uint64_t epoch;     /* code_addr names the same code object for as long
                           as pyu_code_epoch() returns this value */
} pyu_walk_frame;

#define PYU_INSTR_UNKNOWN UINT32_MAX
#define PYU_OWNER_THREAD 0       /* a function's frame on the data stack */
#define PYU_OWNER_GENERATOR 1    /* a generator's or coroutine's frame */
#define PYU_OWNER_FRAME_OBJECT 2 /* kept alive by a frame object */
#define PYU_OWNER_ENTRY 3        /* an entry or shim frame of the
                                    interpreter (PYU_WALK_ENTRY_FRAMES) */

/* PYU_WALK_ASYNC: a task whose frames follow. */
typedef struct pyu_walk_task {
    uint64_t id;        /* the task object's address */
    const char *name;   /* its name; an int name reads "Task-N" */
    size_t first_frame; /* index of its innermost frame: 0 for the running
                           task (reported once its coroutine's frame has
                           been), then where each awaiter's frames start */
    int running;        /* the thread's running task */
} pyu_walk_task;

/* After a thread's frames. */
typedef struct pyu_walk_end {
    size_t nframes;  /* frames reported */
    int truncated;   /* PYU_TRUNC_* */
    unsigned status; /* the thread's status, final: adds PYU_STATUS_GC on
                        CPython 3.15 when the collection's frame is on its
                        stack */
    int error;       /* 0, or the negated code of the error that stopped
                        its frames early; pyu_errmsg() says what failed
                        ("after N frames: ...") until the next call on the
                        session */
} pyu_walk_end;

/* The callbacks; each may be NULL.  A NULL frame callback means frames are
 * not read at all (thread_end then reports none). */
typedef struct pyu_walker {
    unsigned flags; /* PYU_WALK_* */
    int (*interpreter)(void *arg, const pyu_walk_interp *interp);
    int (*thread)(void *arg, const pyu_walk_thread *thread);
    int (*frame)(void *arg, const pyu_walk_frame *frame);
    int (*task)(void *arg, const pyu_walk_task *task);
    int (*thread_end)(void *arg, const pyu_walk_thread *thread,
                      const pyu_walk_end *end);
    int (*interpreter_end)(void *arg, const pyu_walk_interp *interp);
} pyu_walker;

/* Walks the target: stops it for the duration when the memory source can
 * (pyu_open_pid without PYU_OPEN_NONBLOCKING), reads, lets it run again.
 * An error inside one thread's frames is reported in its thread_end and
 * the walk goes on; failing to read the runtime, an interpreter or the
 * first thread state of an interpreter fails the walk, as do running out
 * of memory and the process vanishing.  Returns 0 when the walk ran to its
 * end, the value a callback stopped it with, or a negated error (message
 * in pyu_errmsg).  PYU_WALK_ASYNC before CPython 3.14 fails with
 * -PYU_E_VERSION. */
PYU_API int pyu_walk(pyu_session *s, const pyu_walker *w, void *arg);

/* A variable of a frame that has a value (pyu_frame_locals). */
typedef struct pyu_var {
    const char *name;
    int kind;          /* PYU_VAR_* */
    const char *type;  /* the name of its value's type; "" when unreadable */
    const char *value; /* a bounded repr made from memory (docs/dump.md):
                          as Python's for None, bool, int, float, str,
                          bytes, tuple, list, dict, set, frozenset; else
                          "<TypeName at 0xADDR>"; "<unreadable>" */
    uint64_t addr;     /* the object; 0 for an int tagged in the slot */
} pyu_var;

#define PYU_VAR_ARGUMENT 0 /* an argument (also one a closure captures) */
#define PYU_VAR_LOCAL 1    /* a local variable */
#define PYU_VAR_CELL 2     /* a local variable a closure captures */
#define PYU_VAR_FREE 3     /* a variable of an enclosing function */

/* "argument", "local", "cell", "free"; NULL for other values. */
PYU_API const char *pyu_var_kind_name(int kind);

/* Calls fn for each variable of frame f that has a value, while the walk
 * reports f (from the frame callback): its arguments, then its other
 * locals, cells and free variables, in the code object's order; unbound
 * ones are left out, and so are the hidden ones of inlined
 * comprehensions.  The strings are valid during the call.  Reads memory
 * only.  Returns 0, fn's non-zero value, or a negated error (the frame's
 * variables cannot be read; pyu_errmsg says why). */
PYU_API int pyu_frame_locals(pyu_session *s, const pyu_walk_frame *f,
                             int (*fn)(void *arg, const pyu_var *v),
                             void *arg);

/* ---------------------------------------------------------- py-print */

/* Where pyu_frame_lookup found an expression's first name. */
#define PYU_SCOPE_LOCAL 0   /* the frame's variables (or its locals dict: a
                               class body, exec) */
#define PYU_SCOPE_GLOBAL 1  /* the frame's globals */
#define PYU_SCOPE_BUILTIN 2 /* the frame's builtins */

/* "local", "global", "builtin" (python-gdb.py's words); NULL for other
 * values. */
PYU_API const char *pyu_scope_name(int scope);

#define PYU_VALUE_MAX 512 /* bytes of a value's repr (with the NUL) */

typedef struct pyu_lookup {
    int scope;                 /* PYU_SCOPE_* */
    uint64_t addr;             /* the object; 0 for an int tagged in a slot */
    char type[64];             /* the name of its type; "" when unreadable */
    char value[PYU_VALUE_MAX]; /* its bounded repr, as pyu_var's value */
} pyu_lookup;

/* Looks up expr in the interpreter frame at frame (a pyu_frame's addr)
 * from memory alone, as py-print does; nothing runs in the target:
 * - NAME as Python finds it: the frame's variables (or its locals dict),
 *   then its globals, then its builtins;
 * - then any chain of .ATTR (an object's own dict: managed, inline
 *   values or tp_dictoffset; a __slots__ entry; a module's dict; a
 *   class's and its bases' dicts), [I] of a list or tuple (I < 0 counts
 *   from the end), ['KEY'], ["KEY"] or [I] of a dict (str and int keys).
 *   A property or another computed attribute is not evaluated.
 * Returns 0; -PYU_E_NOTFOUND when a part is not there or would need code
 * to run, -PYU_E_INVAL for an expression of another form (pyu_errmsg
 * says which part and why, in one line); or another negated error.  The
 * target must be stopped. */
PYU_API int pyu_frame_lookup(pyu_session *s, uint64_t frame,
                             const char *expr, pyu_lookup *out);

/* The names pyu_frame_lookup can take after expr, for completion: with
 * expr "", the frame's variables, then the keys of its locals dict,
 * globals and builtins; else the attributes of the object expr names
 * (its own dict's keys, then those of its class and the class's bases; a
 * module's or a class's dict).  Calls fn for each (a name may come more
 * than once); a non-zero return stops.  Returns 0, fn's value, or a
 * negated error (message in pyu_errmsg). */
PYU_API int pyu_frame_names(pyu_session *s, uint64_t frame, const char *expr,
                            int (*fn)(void *arg, const char *name),
                            void *arg);

/* A frame as a walk reported it, with its names and line. */
typedef struct pyu_frame {
    const char *function; /* co_qualname */
    const char *name;     /* co_name */
    const char *file;     /* co_filename */
    int line;             /* 1-based; 0 when the location is unknown */
    uint64_t code_addr;   /* address of the code object */
    /* a dump taken with PYU_WALK_LOCALS; else NULL, 0, NULL */
    pyu_var *locals;      /* as pyu_frame_locals reports them */
    size_t nlocals;
    const char *locals_error; /* why they could not be read, or NULL */
    /* where on its lines (co_positions; the line is `line`): the last
     * line, 0 when unknown; the columns, 0-based UTF-8 byte offsets into
     * the first and the last line, -1 when unknown */
    int end_line, col, end_col;
    uint64_t addr; /* the interpreter frame (pyu_frame_lookup); 0 unknown */
} pyu_frame;

/* Fills *out for a frame a walk reported (its code object is cached).  The
 * strings belong to the session: valid until its caches change, at least
 * until the callback that received f returns; copy what you keep.  Returns
 * 0, or -PYU_E_STATE when the session's code epoch is no longer f's. */
PYU_API int pyu_frame_describe(pyu_session *s, const pyu_walk_frame *f,
                               pyu_frame *out);

/* The session's code epoch: it changes whenever cached code objects are
 * dropped (CPython reported code objects freed, or the cache was full), so
 * that a code object's address may now name another. */
PYU_API uint64_t pyu_code_epoch(const pyu_session *s);

/* Short names of a status bit ("has_gil", ... as in JSON; or with text
 * set, "holds the GIL", ... as in the text dump), NULL for other values;
 * and of a PYU_TRUNC_* value ("depth", "loop", "tasks"; NULL for none). */
PYU_API const char *pyu_status_name(unsigned bit, int text);
PYU_API const char *pyu_trunc_name(int truncated);

/* ------------------------------------------------------------------- dumps */

/* After a PYU_WALK_ASYNC dump: a task whose frames are part of a thread's
 * stack.  The running task's frames start at frames[0]; each task after it
 * awaits the one before. */
typedef struct pyu_task_link {
    size_t first_frame;    /* its innermost frame's index in frames */
    uint64_t task_id;      /* the task object's address */
    const char *task_name;
} pyu_task_link;

/* After a PYU_WALK_NATIVE dump: a native frame of a thread, and the
 * Python frames it runs (a call of the eval loop) when any. */
typedef struct pyu_native_entry {
    pyu_native_frame frame; /* strings owned by the dump */
    size_t python_first;    /* its Python frames: frames[python_first] (the
                               innermost of them) ... */
    size_t python_count;    /* ... python_count of them; 0: none */
} pyu_native_entry;

typedef struct pyu_thread {
    int64_t interpreter_id;
    uint64_t thread_id;        /* threading.get_ident() */
    uint64_t native_thread_id; /* kernel thread id */
    int main;                  /* the interpreter's main thread */
    unsigned status;           /* PYU_STATUS_* */
    pyu_frame *frames;         /* innermost first */
    size_t nframes;
    int truncated;    /* PYU_TRUNC_*: why the stack stops early */
    const char *error; /* why the walk stopped early, or NULL */
    pyu_task_link *tasks; /* PYU_WALK_ASYNC: running task, then awaiters */
    size_t ntasks;
    int crashed;          /* it received the signal that killed the process
                             (a core's fatal signal) */
    /* PYU_WALK_NATIVE */
    pyu_native_entry *native; /* its native stack, innermost first */
    size_t nnative;
    size_t python_unplaced; /* Python frames no native frame was found to
                               run (the outermost ones: the native stack
                               was cut short); shown after the others */
    const char *native_error; /* why there is no native stack, or NULL */
    const char *name; /* threading's name of it (Thread.name), read from
                         threading._active through a frame of its
                         interpreter; NULL when that cannot be read */
} pyu_thread;

typedef struct pyu_dump {
    pyu_process process;
    pyu_thread *threads;
    size_t nthreads;
    int threads_truncated; /* more threads than the limit */
    int has_async;         /* taken with PYU_WALK_ASYNC */
    int has_locals;        /* taken with PYU_WALK_LOCALS */
    int has_native;        /* taken with PYU_WALK_NATIVE */
    const char *source_root; /* where the target's files are seen from
                                here: put before a source file's path
                                ("/proc/PID/root" for a live process, so
                                that a container's files are found; a
                                core's --sysroot), or "" */
} pyu_dump;

/* Reads every thread of every interpreter (a caller of pyu_walk; flags are
 * its PYU_WALK_* flags).  Strings in the dump are owned by the dump, which
 * stays valid after the session is freed.  Errors while walking one thread
 * are recorded in that thread's `error` and do not fail the dump; failing
 * to read the runtime or the interpreter list does.  Returns 0 or a
 * negated error. */
PYU_API int pyu_dump_take(pyu_session *s, unsigned flags, pyu_dump **out);

/* Frees a dump; accepts NULL. */
PYU_API void pyu_dump_free(pyu_dump *d);

/* Output flags. */
#define PYU_TEXT_NO_SOURCE 1u /* do not print source lines */
#define PYU_TEXT_NATIVE_LAST 2u /* a PYU_WALK_NATIVE dump: the Python
                                   traceback, then only the native frames
                                   past its innermost Python frame */

/* Writes the dump as a traceback-like text / as JSON (docs/json.md).
 * Return 0, or -PYU_E_IO when the stream failed. */
PYU_API int pyu_dump_write_text(const pyu_dump *d, FILE *out, unsigned flags);
PYU_API int pyu_dump_write_json(const pyu_dump *d, FILE *out);

/* Writes a frame's variables of a PYU_WALK_LOCALS dump as the text dump
 * shows them under the frame: "      Arguments:" then "        name =
 * value" lines, "      Locals:" and the others likewise (or the line
 * saying why they are not shown).  Returns 0, or -PYU_E_IO when the
 * stream failed. */
PYU_API int pyu_frame_write_locals(const pyu_frame *f, FILE *out);

/* A source file of the target, as the text dump reads it to show a
 * frame's lines (pyu_source_read). */
typedef struct pyu_source {
    char *text;  /* its bytes with a NUL after them (owned: free with
                    pyu_source_free), or NULL when not read */
    size_t len;
    int error;   /* why it was not read: an errno (ENOENT; EINVAL: not a
                    regular file; EFBIG: larger than 8 MiB), else 0 */
    int changed; /* 1: it changed after the target's source time (the
                    process's start, the core's writing: the text dump
                    then does not show its lines), 0: it did not, -1:
                    unknown */
} pyu_source;

/* Reads the source file `path` (a frame's file) of dump d's target the
 * way the text dump does: below d->source_root first, then as it is;
 * regular files only, never blocking on a FIFO or a device.  Returns 0
 * (out->text set), -PYU_E_IO (out->error says why) or -PYU_E_NOMEM.
 * Free out with pyu_source_free in every case. */
PYU_API int pyu_source_read(const pyu_dump *d, const char *path,
                            pyu_source *out);
PYU_API void pyu_source_free(pyu_source *src);

/* ------------------------------------------------------- asyncio tasks */

/* One asyncio task (CPython 3.14+). */
typedef struct pyu_task {
    uint64_t id;               /* address of the task object */
    const char *name;          /* its name; an int name reads "Task-N" */
    int64_t interpreter_id;
    uint64_t thread_id;        /* ident of the thread whose task list holds
                                  it; 0 when the interpreter's (tasks left
                                  by threads that ended) */
    uint64_t native_thread_id; /* that thread's kernel id, or 0 */
    int running;               /* its thread's current task */
    pyu_frame *stack;          /* its coroutine chain, innermost first */
    size_t nstack;
    uint64_t *awaited_by;      /* ids of the tasks awaiting it */
    size_t nawaited_by;
    const char *error;         /* why the task could not be read fully */
    int truncated;             /* PYU_TASK_TRUNC_* bits: what a limit cut */
} pyu_task;

#define PYU_TASK_TRUNC_STACK 1u    /* its coroutine chain is longer than
                                      1024 frames: the outermost are shown */
#define PYU_TASK_TRUNC_AWAITERS 2u /* more than 65536 tasks await it */

typedef struct pyu_tasks {
    pyu_process process;
    pyu_task *tasks;           /* by interpreter, thread list order */
    size_t ntasks;
    int truncated;             /* more tasks than the limit, or a list
                                  that loops or cannot be read to its end */
} pyu_tasks;

/* Reads every asyncio task of every interpreter: each thread's task list
 * and the interpreter's list, using the .AsyncioDebug section of the
 * _asyncio module (or of the interpreter when it is built in).  Fails with
 * PYU_E_VERSION before CPython 3.14.  A process that never loaded _asyncio
 * has no tasks.  Returns 0 or a negated error. */
PYU_API int pyu_tasks_take(pyu_session *s, pyu_tasks **out);

/* Frees a task list; accepts NULL. */
PYU_API void pyu_tasks_free(pyu_tasks *t);

/* The task with that id, or NULL. */
PYU_API const pyu_task *pyu_tasks_find(const pyu_tasks *t, uint64_t id);

/* Writes the tasks as a table like `python -m asyncio ps`, as a tree like
 * `python -m asyncio pstree`, or as JSON (docs/json.md).  The tree writer
 * sets *cycle (when not NULL) to 1 and prints the cycle instead of a tree
 * when the await graph has one.  Return 0 or -PYU_E_IO. */
PYU_API int pyu_tasks_write_table(const pyu_tasks *t, FILE *out);
PYU_API int pyu_tasks_write_tree(const pyu_tasks *t, FILE *out, int *cycle);
PYU_API int pyu_tasks_write_json(const pyu_tasks *t, FILE *out);

/* ------------------------------------------------ JSON to any consumer */

/* The JSON of dumps and task lists (docs/json.md) is described once, as
 * calls to a sink: the _write_json functions above give it a sink that
 * prints JSON text; a caller can give one that builds its own objects
 * (the gdb plugin's Python dicts and lists), so both hold the same keys
 * and values.  Every call returns 0 to go on, or a negated error that
 * stops the description and is returned by the _emit function. */
typedef struct pyu_json_sink {
    void *arg;
    /* A container begins ('{' or '['), as the next value.  layout is a
     * hint for text only (PYU_JSON_ROWS*). */
    int (*open)(void *arg, char kind, unsigned layout);
    int (*close)(void *arg, char kind);
    /* The key of the next value, in the innermost object. */
    int (*key)(void *arg, const char *key);
    /* Values.  Strings are the target's bytes: UTF-8, or other bytes that
     * the text sink writes as \udcXX (Python's surrogateescape). */
    int (*string)(void *arg, const char *s);
    int (*integer)(void *arg, int64_t v);
    int (*unsigned_integer)(void *arg, uint64_t v);
    int (*boolean)(void *arg, int v);
    int (*null)(void *arg);
} pyu_json_sink;

#define PYU_JSON_ROWS 1u     /* each element of this array on a line */
#define PYU_JSON_ROWS_END 2u /* and its closing bracket on one too */

/* Describe a dump, a task list, or one frame (with its "locals" and
 * "locals_error" when with_locals) to sink.  Return 0 or the first
 * negated error a call of the sink returned. */
PYU_API int pyu_dump_emit(const pyu_dump *d, const pyu_json_sink *sink);
PYU_API int pyu_tasks_emit(const pyu_tasks *t, const pyu_json_sink *sink);
PYU_API int pyu_frame_emit(const pyu_frame *f, int with_locals,
                           const pyu_json_sink *sink);

/* A sink that prints JSON text to out, laid out as the _write_json
 * functions print it (they use one); descriptions given to it inside an
 * array it was told to open make one JSON array.  NULL when out of
 * memory; free it with pyu_json_text_free (accepts NULL). */
PYU_API pyu_json_sink *pyu_json_text_new(FILE *out);
PYU_API void pyu_json_text_free(pyu_json_sink *sink);

/* ---------------------------------------------------------------- profiles */

/* A profile: what a sampler (or a caller feeding stacks one at a time)
 * recorded.  Stacks are interned: a frame is a function and a line; a
 * stack is a node of a tree whose root is the empty stack, each node one
 * frame deeper than its parent; the profile counts samples per (thread,
 * node).  Every output format is written from this one structure. */
typedef struct pyu_profile pyu_profile;

/* What a function of a profile is. */
#define PYU_FUNC_PYTHON 0 /* Python code */
#define PYU_FUNC_GC 1     /* "<GC>": the thread runs the garbage collector */
#define PYU_FUNC_NATIVE 2 /* "<native>": C code outside the eval loop */
#define PYU_FUNC_UNKNOWN 3 /* "<unknown>": a sampler could not read the
                              frames above it consistently (the thread
                              alone when none) */

typedef struct pyu_profile_func {
    const char *name; /* co_qualname, or "<GC>", "<native>", "<unknown>" */
    const char *file; /* co_filename ("" for the others) */
    int first_line;   /* co_firstlineno (0 for the others) */
    int kind;         /* PYU_FUNC_* */
} pyu_profile_func;

typedef struct pyu_profile_frame {
    uint32_t func; /* index into funcs */
    int line;      /* line of the instruction it ran; 0 when unknown */
    int instr;     /* with PYU_SAMPLE_OPCODES: the instruction's offset in
                      code units (dis's offset / 2); else -1 */
    const char *op; /* with PYU_SAMPLE_OPCODES: the instruction's name as
                       the target ran it (specialised: "BINARY_OP_ADD_INT");
                       else "" */
    const char *base; /* the instruction as compiled ("BINARY_OP", dis's
                         name for it); else "" */
} pyu_profile_frame;

typedef struct pyu_profile_node {
    uint32_t parent; /* the stack without its innermost frame (0: root) */
    uint32_t frame;  /* its innermost frame (index into frames) */
    uint32_t depth;  /* number of frames; the root (node 0) has 0 */
} pyu_profile_node;

/* A process a profile's samples came from: one, or several when a run
 * samples several targets (`sample PID PID...`, --subprocesses). */
typedef struct pyu_profile_process {
    int pid;             /* its process id (0 when unknown) */
    const char *command; /* its command line, the arguments joined by
                            spaces, or "" */
    const char *python;  /* its CPython's version ("3.14.7"), or "" */
    int free_threaded;   /* a free-threaded build */
    uint64_t start_ns;   /* since the run's start, when it was first
                            sampled (0: from the start) */
    uint64_t end_ns;     /* since the run's start, when it exited or ran
                            another program (exited != 0) */
    int exited;          /* it ended before the run did */
} pyu_profile_process;

typedef struct pyu_profile_thread {
    uint64_t thread_id;        /* threading.get_ident() */
    uint64_t native_thread_id; /* kernel thread id */
    int64_t interpreter_id;
    int main;                  /* its interpreter's main thread */
    uint64_t samples;          /* stacks recorded for it */
    uint64_t status[8];        /* of those, how many had status bit i
                                  (1u << i: PYU_STATUS_*) */
    const char *name;          /* the kernel's name of the thread when it
                                  has one of its own (not the process's
                                  name), else "" */
    uint32_t process;          /* index into processes */
} pyu_profile_thread;

/* The samples of one stack on one thread with one status: a (thread,
 * node, status) triple appears once. */
typedef struct pyu_profile_stack {
    uint32_t thread; /* index into threads */
    uint32_t node;   /* index into nodes; its innermost frame last */
    uint64_t count;
    unsigned status; /* PYU_STATUS_* of the thread in those samples */
} pyu_profile_stack;

/* Sampling modes: which threads a sample records. */
#define PYU_MODE_WALL 0      /* every thread */
#define PYU_MODE_CPU 1       /* threads running on a CPU */
#define PYU_MODE_GIL 2       /* the thread holding the GIL */
#define PYU_MODE_EXCEPTION 3 /* threads raising or handling an exception
                                while they hold the GIL (as CPython's
                                sampler: where time goes to exceptions) */

/* About the run, set by the sampler and its caller. */
typedef struct pyu_profile_info {
    pyu_process process;   /* its pid and CPython version (a capture
                              keeps those two) */
    int mode;              /* PYU_MODE_* */
    unsigned flags;        /* the sampler's PYU_SAMPLE_* flags */
    uint64_t interval_ns;  /* the schedule's period; 0: as fast as possible */
    uint64_t start_ns;     /* CLOCK_REALTIME at the start */
    uint64_t duration_ns;  /* wall time sampled */
    uint64_t samples;      /* samples taken (failed ones included) */
    uint64_t failed;       /* samples in which some thread's stack could
                              not be read whole (counted with <unknown>,
                              on its outer frames or alone), or nothing
                              of the target */
    uint64_t missed;       /* ticks of the schedule never served */
    uint64_t busy_ns;      /* of duration_ns, the time spent taking samples
                              (the rest waited for ticks); 0: unknown */
} pyu_profile_info;

/* The whole profile: arrays valid until the profile changes. */
typedef struct pyu_profile_data {
    const pyu_profile_info *info;
    const pyu_profile_func *funcs;
    size_t nfuncs;
    const pyu_profile_frame *frames;
    size_t nframes;
    const pyu_profile_node *nodes; /* nodes[0] is the root */
    size_t nnodes;
    const pyu_profile_thread *threads;
    size_t nthreads;
    const pyu_profile_stack *stacks; /* in order of first appearance */
    size_t nstacks;
    uint64_t total;                  /* sum of all counts */
    const pyu_profile_process *processes; /* at least one once a thread
                                             is added */
    size_t nprocesses;
} pyu_profile_data;

/* A new, empty profile, or NULL when out of memory. */
PYU_API pyu_profile *pyu_profile_new(void);
PYU_API void pyu_profile_free(pyu_profile *p);
/* Its contents (never NULL for a profile). */
PYU_API const pyu_profile_data *pyu_profile_get(pyu_profile *p);
/* Its run information, for the caller to complete (duration, missed). */
PYU_API pyu_profile_info *pyu_profile_info_of(pyu_profile *p);

/* Building a profile by hand (a debugger script feeding the stacks it saw
 * at breakpoints; the sampler uses the same calls).  Each returns an index
 * (>= 0), or a negated error when out of memory.  Strings are copied. */
PYU_API long pyu_profile_add_thread(pyu_profile *p, uint64_t thread_id,
                                    uint64_t native_thread_id,
                                    int64_t interpreter_id, int main);
/* A process (pid; command and python may be NULL): the one of that pid
 * that has not exited when there is one (an empty command or version of
 * it filled from these), else a new one, first sampled at start_ns after
 * the run's start.  pyu_profile_add_thread adds to process 0, made from
 * the profile's info when there is none. */
PYU_API long pyu_profile_add_process(pyu_profile *p, int pid,
                                     const char *command, const char *python,
                                     int free_threaded, uint64_t start_ns);
/* Process `process` exited (or ran another program) at t_ns after the
 * run's start: a later process of its pid is another one.  Returns 0 or
 * -PYU_E_INVAL. */
PYU_API int pyu_profile_end_process(pyu_profile *p, uint32_t process,
                                    uint64_t t_ns);
/* pyu_profile_add_thread in process `process`. */
PYU_API long pyu_profile_add_process_thread(pyu_profile *p, uint32_t process,
                                            uint64_t thread_id,
                                            uint64_t native_thread_id,
                                            int64_t interpreter_id, int main);
PYU_API long pyu_profile_add_func(pyu_profile *p, const char *name,
                                  const char *file, int first_line,
                                  int kind);
PYU_API long pyu_profile_add_frame(pyu_profile *p, uint32_t func, int line);
/* A frame at one instruction: its offset in code units, its name as run
 * and as compiled (both "" when unknown). */
PYU_API long pyu_profile_add_instr_frame(pyu_profile *p, uint32_t func,
                                         int line, int instr, const char *op,
                                         const char *base);
/* Whether any frame of p names its instruction. */
PYU_API int pyu_profile_has_instrs(pyu_profile *p);
/* What pyu_profile_select keeps of a profile, and pyu_capture_read of a
 * capture: a thread (its native id or Python ident; 0: every thread), a
 * mode (PYU_MODE_*: a wall profile narrows to gil or exception by each
 * stack's status; -1 or the profile's own: every stack), the
 * samples taken in [from_ns, to_ns) after the start (both 0: all; to_ns
 * 0: to the end; a profile needs its whole timeline for it), and
 * by_line: frames that name no instruction (frames of one function at
 * one line merged, and the stacks through them; select only). */
typedef struct pyu_profile_filter {
    uint64_t thread;
    int pid; /* only the threads of this process (0: every process) */
    int mode;
    uint64_t from_ns, to_ns;
    int by_line;
} pyu_profile_filter;
/* A new profile of what f keeps of p (NULL: all of it), its timeline
 * with it (from the window's start, with a window), into *out.  Returns
 * 0, -PYU_E_INVAL (a window of a profile whose timeline is cut or
 * missing, or a mode it cannot give) or -PYU_E_NOMEM. */
PYU_API int pyu_profile_select(pyu_profile *p, const pyu_profile_filter *f,
                               pyu_profile **out);
/* pyu_profile_select by line: what the formats that do not show
 * instructions are written from.  NULL when out of memory. */
PYU_API pyu_profile *pyu_profile_by_line(pyu_profile *p);
/* The node for stack `parent` with `frame` added innermost. */
PYU_API long pyu_profile_push(pyu_profile *p, uint32_t parent,
                              uint32_t frame);
/* Names thread `thread` (a copy of name).  Returns 0 or a negated
 * error. */
PYU_API int pyu_profile_name_thread(pyu_profile *p, uint32_t thread,
                                    const char *name);
/* Counts n samples of stack `node` on thread `thread`, with thread status
 * `status` (PYU_STATUS_* bits).  Returns 0 or a negated error. */
PYU_API int pyu_profile_count(pyu_profile *p, uint32_t thread, uint32_t node,
                              uint64_t n, unsigned status);

/* The timeline: when each sample was taken and what it counted, for the
 * formats that show time (gecko; raw written from a profile).  The
 * sampler marks every sample it takes; a caller that counts by hand calls
 * pyu_profile_mark after each of its samples (t_ns: nanoseconds since the
 * run's start; failed: the sample failed) and the counts since the
 * previous mark become that sample's events.  The timeline stops (cut)
 * at PYU_TIMELINE_MAX_TICKS samples or PYU_TIMELINE_MAX_EVENTS events,
 * about 48 MiB; the profile's counts go on.  Returns 0 or -PYU_E_NOMEM. */
#define PYU_TIMELINE_MAX_TICKS (1u << 20)
#define PYU_TIMELINE_MAX_EVENTS (1u << 21)
PYU_API int pyu_profile_mark(pyu_profile *p, uint64_t t_ns, int failed);
/* Ends the timeline now, as its limit would (cut): a profile that is
 * only written whole, or whose counts are journaled, keeps no record of
 * each sample. */
PYU_API void pyu_profile_timeline_end(pyu_profile *p);

typedef struct pyu_profile_event {
    uint32_t thread, node; /* as in pyu_profile_stack */
    uint32_t n;            /* samples it counts (1 from the sampler) */
    unsigned status;       /* PYU_STATUS_* */
} pyu_profile_event;

typedef struct pyu_profile_tick {
    uint64_t t_ns; /* since the run's start */
    uint32_t end;  /* its events: [the tick before's end (0), end) */
    int failed;
} pyu_profile_tick;

/* The counts as they come, for a caller that hands each sample's counts
 * on (pyunwind serve: one sampler feeding several scrapes, each with its
 * own window, rate and mode).  From pyu_profile_journal_start on, every
 * count is journaled; pyu_profile_journal_take gives those since the
 * start or the last take (*n of them; valid until the next count) and
 * starts over (pyu_profile_timeline_end keeps such a profile, sampled
 * for days, to its stacks and counts). */
typedef struct pyu_profile_counted {
    uint32_t thread, node; /* as in pyu_profile_stack */
    unsigned status;       /* PYU_STATUS_* */
    uint64_t n;            /* samples it counts (1 from the sampler) */
} pyu_profile_counted;
PYU_API void pyu_profile_journal_start(pyu_profile *p);
PYU_API const pyu_profile_counted *pyu_profile_journal_take(pyu_profile *p,
                                                            size_t *n);

typedef struct pyu_profile_timeline {
    const pyu_profile_tick *ticks;
    size_t nticks;
    const pyu_profile_event *events; /* events[ticks[nticks - 1].end ..
                                        nevents) were counted after the
                                        last mark */
    size_t nevents;
    int cut; /* it stopped at its limit: later samples are not in it */
} pyu_profile_timeline;
/* The timeline, valid until the profile changes. */
PYU_API void pyu_profile_timeline_get(pyu_profile *p,
                                      pyu_profile_timeline *out);

/* Output.  collapsed: one line per (thread, stack), "tid:NATIVE_ID;frame;
 * ...;frame COUNT", outermost frame first, a frame as "file:function:line"
 * with the file's base name (Brendan Gregg's format as CPython's sampler
 * writes it; read by flamegraph.pl, speedscope, inferno); most samples
 * first.  top: functions by self and total
 * samples, like pstats (sort: PYU_TOP_SORT_*; limit: rows, 0 = all).
 * json: the whole profile (docs/json.md).  Return 0 or -PYU_E_IO. */
PYU_API int pyu_profile_write_collapsed(pyu_profile *p, FILE *out);
#define PYU_TOP_SORT_SELF 0
#define PYU_TOP_SORT_TOTAL 1
#define PYU_TOP_SORT_NAME 2
PYU_API int pyu_profile_write_top(pyu_profile *p, FILE *out, int sort,
                                  size_t limit);
PYU_API int pyu_profile_write_json(pyu_profile *p, FILE *out);
/* pprof: gzip-compressed profile.proto (`go tool pprof`, Pyroscope,
 * Parca): sample types samples/count and wall (or cpu)/nanoseconds, a
 * location per frame with its function, file and line, a "thread" label
 * per sample (docs/formats.md).  Binary. */
PYU_API int pyu_profile_write_pprof(pyu_profile *p, FILE *out);
/* speedscope's file format: a sampled profile per thread, a frame per
 * function, weights in nanoseconds (docs/formats.md). */
PYU_API int pyu_profile_write_speedscope(pyu_profile *p, FILE *out);
/* flamegraph: one self-contained HTML page (no network when viewed): a
 * flame graph with search, zoom, per-thread view, inverted view, and each
 * function's total and self samples (docs/formats.md). */
PYU_API int pyu_profile_write_flamegraph(pyu_profile *p, FILE *out);
/* The differential flame graph of p against a baseline profile: p's
 * frames coloured by the change of their share of all samples (red: a
 * larger share, blue: smaller), and the baseline's stacks that vanished
 * (docs/formats.md). */
PYU_API int pyu_profile_write_flamegraph_diff(pyu_profile *p,
                                              pyu_profile *base, FILE *out);
/* heatmap: one self-contained HTML page of the profiled source files, each
 * line with its self and total samples, links between calling lines and
 * called functions, and an index of the files by heat; the source is read
 * from the files the profile names, on this machine (docs/formats.md). */
PYU_API int pyu_profile_write_heatmap(pyu_profile *p, FILE *out);
/* gecko: the Firefox Profiler's processed profile format (version 70;
 * profiler.firefox.com and its profiler-cli open it): a thread per
 * profile thread with its samples in time, from the timeline (above),
 * and markers for the spans in which it held or waited for the GIL, ran
 * on a CPU or the GC, or handled an exception (docs/formats.md). */
PYU_API int pyu_profile_write_gecko(pyu_profile *p, FILE *out);
/* raw: the whole profile as a capture (below): its samples with their
 * times, from the timeline; or, when the timeline does not hold every
 * count (a profile counted by hand, or a timeline cut at its limit), one
 * sample with every stack and its count.  Binary. */
PYU_API int pyu_profile_write_raw(pyu_profile *p, FILE *out);

/* The formats, one table read by every front end (its --format parser,
 * its help, its dispatch):
 *   name       what --format takes;
 *   summary    a few words for a help text, or "";
 *   binary     not text: refused on a terminal and in a debugger's output;
 *   keeps_instructions  written with each frame's instruction (--opcodes);
 *              the others are written from pyu_profile_by_line().
 * pyu_profile_formats gives them in the order help lists them (*n: how
 * many); pyu_profile_format the one named, or NULL. */
typedef struct pyu_format {
    const char *name;
    const char *summary;
    int binary;
    int keeps_instructions;
} pyu_format;
PYU_API const pyu_format *pyu_profile_formats(size_t *n);
PYU_API const pyu_format *pyu_profile_format(const char *name);

/* What a writer may need beyond the profile: top's sort (PYU_TOP_SORT_*)
 * and limit (rows, 0 = all); the baseline of a differential flame graph
 * (flamegraph only; NULL: none); flags. */
typedef struct pyu_write_opts {
    int sort;
    size_t limit;
    pyu_profile *base;
    unsigned flags; /* PYU_WRITE_* */
} pyu_write_opts;
/* pprof: the "pid" and "process" labels on every sample, also when the
 * profile holds one process (a server's scrapes: what a continuous
 * profiler keeps apart by labels). */
#define PYU_WRITE_PROCESS_LABELS 1u

/* Writes p in the format named `format` (o may be NULL: top's defaults,
 * self and 40 rows).  Returns 0, -PYU_E_INVAL (no such format, or a
 * baseline for another format than flamegraph), -PYU_E_NOMEM or
 * -PYU_E_IO. */
PYU_API int pyu_profile_write(pyu_profile *p, const char *format,
                              const pyu_write_opts *o, FILE *out);

/* Captures (the raw format, docs/formats.md#raw): every sample as it is
 * taken, with its time, streamed to a file, so that a run that is killed
 * keeps what it had, and read back into a profile by `pyunwind report`
 * with filters.  Start one after pyu_sampler_new (which fills the
 * profile's info); call pyu_capture_sample after each pyu_sampler_take:
 * t_ns its time since the start, failed whether it failed, missed the
 * schedule's ticks missed since the last one.  Output is flushed at least
 * every 10 ms.  Each returns 0 or -PYU_E_IO (the write failed) /
 * -PYU_E_NOMEM; pyu_capture_end writes the end record (the profile's info:
 * duration, samples, failed, missed) and frees the capture. */
typedef struct pyu_capture pyu_capture;
PYU_API int pyu_capture_new(pyu_profile *p, FILE *out, pyu_capture **c);
PYU_API int pyu_capture_sample(pyu_capture *c, uint64_t t_ns, int failed,
                               uint64_t missed);
PYU_API int pyu_capture_end(pyu_capture *c);

/* What a report keeps of a capture: pyu_profile_select's filter, read as
 * the capture streams in (by_line aside: select the profile read); with a
 * pid, the samples of that process (and every missed tick) and the info
 * naming it. */
typedef pyu_profile_filter pyu_capture_filter;
/* Reads a capture into p (a new profile), keeping what f selects (NULL:
 * everything); p's info becomes the capture's, for the window kept, and
 * p's processes the capture's (with their start and end; one from the
 * header's pid and version in a capture of before version 4).
 * Returns 0, with a note in msg when the capture ends early (a killed
 * run: the whole samples before the cut are kept) and msg[0] == 0
 * otherwise; or -PYU_E_CORRUPT (not a capture, or a malformed one: msg
 * says where), -PYU_E_INVAL (a mode the capture cannot give, or a pid it
 * has no process of: msg lists its pids),
 * -PYU_E_NOMEM. */
PYU_API int pyu_capture_read(FILE *in, const pyu_capture_filter *f,
                             pyu_profile *p, char *msg, size_t msglen);

/* ---------------------------------------------------------------- sampling */

/* A sampler reads the stacks of the threads a mode selects, again and
 * again, into a profile.  It keeps what it can prove unchanged from one
 * sample to the next (the frame cache), so that a sample of a thread whose
 * stack changed little costs one read of the target. */
typedef struct pyu_sampler pyu_sampler;

/* Flags of pyu_sampler_opts. */
#define PYU_SAMPLE_GC 1u        /* a "<GC>" frame innermost while a thread
                                   runs the garbage collector */
#define PYU_SAMPLE_NATIVE 2u    /* a "<native>" frame where C code called
                                   back into Python (an entry frame between
                                   two Python frames), as CPython's sampler
                                   --native */
#define PYU_SAMPLE_ASYNC 4u     /* the running task's stack continued
                                   through its awaiters (PYU_WALK_ASYNC) */
#define PYU_SAMPLE_BLOCKING 8u  /* stop the target for each sample (when the
                                   memory source can) */
#define PYU_SAMPLE_READ_ONLY 16u /* never write to the target: the frame
                                   cache does without its anchor */
#define PYU_SAMPLE_NO_CACHE 32u /* no frame cache: every stack is read and
                                   resolved whole (the reference the cache
                                   is tested against) */
#define PYU_SAMPLE_OPCODES 64u  /* each frame names the instruction it ran
                                   (pyu_profile_frame's instr, op, base), as
                                   CPython's sampler --opcodes */
#define PYU_SAMPLE_CPU_STATUS 128u /* every thread's PYU_STATUS_ON_CPU known
                                   in every mode (a wall profile that is
                                   also read as a cpu one: one read of the
                                   thread's scheduler state each) */

typedef struct pyu_sampler_opts {
    int mode;        /* PYU_MODE_* */
    unsigned flags;  /* PYU_SAMPLE_* */
    uint64_t thread; /* only this thread (native id or ident), 0: all */
} pyu_sampler_opts;

typedef struct pyu_sampler_stats {
    uint64_t samples;        /* pyu_sampler_take calls */
    uint64_t failed;         /* samples in which some thread's stack
                                could not be read whole (counted with
                                <unknown>, on its outer frames or alone),
                                or nothing of the target */
    uint64_t stacks;         /* stacks recorded */
    uint64_t torn;           /* stacks that did not pass the acceptance
                                rules and were read again */
    uint64_t reads;          /* read calls made to the memory source */
    uint64_t frames_read;    /* frames read from the target */
    uint64_t frames_cached;  /* frames taken from the frame cache */
    uint64_t cache_full;     /* stacks whose frames below the innermost
                                came from the cache (3.15's anchor) */
    uint64_t cache_part;     /* stacks whose frames from the one the
                                anchor names down came from the cache,
                                the few above it read (3.15) */
    uint64_t cache_miss;     /* stacks read whole */
    uint64_t unproven;       /* stacks recorded from a snapshot that
                                passed the rules, without an anchor's
                                proof (3.11-3.14, read-only: all of them) */
    uint64_t anchor_writes;  /* anchors written into the target */
    int anchors;             /* 1 when the sampler writes anchors */
    uint64_t unknown;        /* stacks recorded with an <unknown> frame on
                                top: read again and again, they never
                                passed the rules */
    uint64_t snapshots;      /* reads of one thread's snapshot beyond the
                                sample's batched read */
    uint64_t later;          /* stacks taken from the current frame read
                                again right after the frames (the one read
                                before them did not pass the rules) */
    uint64_t grafted;        /* stacks with the innermost frames the first
                                read found put back on top of another walk
                                (they had ended: a generator yielded, a
                                call from C returned): of the current frame
                                read again, or of the frame below them on
                                the data stack */
    uint64_t resumed;        /* walks gone on from a generator's frame that
                                had yielded by its copy to the frame that
                                resumed it (it still holds the generator) */
    uint64_t entered;        /* 3.11, 3.12: stacks read from the frame
                                that entered the eval loop the thread
                                state named, its current frame there
                                being gone by its read (that loop had
                                ended: a generator yielded, a callback
                                of C code returned) */
    uint64_t topped;         /* 3.11: stacks of a generator's eval loop
                                taken at the thread state's moment (the
                                loop's entry frame, then the frames of
                                the data stack up to the top the thread
                                state had) in place of the walk from the
                                loop's word, of a later moment */
    uint64_t popped;         /* stacks whose current frame had been popped
                                by the time it was copied (3.14+: a short
                                call is often over that soon) */
    uint64_t popped_left;    /* ... of them recorded as the caller's stack
                                (the popped frames' code could not be told
                                or their callers had gone past the call) */
    uint64_t reused;         /* stacks whose current frame's slot of the
                                data stack held another call by its copy
                                (its code object's frame does not end where
                                the data stack ended when the thread state
                                was read): recorded as the frames below it
                                then, the call met lately in that slot, of
                                that size, on top; <unknown> when none
                                was; and stacks whose innermost frames
                                were called from a slot that held another
                                call by its copy, the call met lately there
                                put between */
    uint64_t unlinked;       /* 3.11, 3.12: stacks read from the loop below
                                the one the thread state named, which had
                                not linked its first frame yet (its word
                                was stack garbage) */
} pyu_sampler_stats;

/* A sampler over an opened session, recording into p (which it fills in
 * p's info: pid, python, mode, flags).  On CPython 3.15 with a memory
 * source that can write, and unless PYU_SAMPLE_READ_ONLY, it writes each
 * sampled thread's `last_profiled_frame` (the frame cache anchor CPython
 * 3.15 keeps for remote profilers: the interpreter moves it to the caller
 * when that frame returns), as CPython's own sampler does: the one write
 * pyunwind makes to a target.  Returns 0 or a negated error. */
PYU_API int pyu_sampler_new(pyu_session *s, const pyu_sampler_opts *o,
                            pyu_profile *p, pyu_sampler **out);
/* Takes one sample: reads the selected threads' stacks and counts each in
 * the profile.  Returns the number of stacks recorded, or a negated error
 * when the sample failed as a whole (-PYU_E_NOPROC: the process is gone,
 * and the sample is not counted: there was no moment of it to count; the
 * message in pyu_errmsg).  A stack read from a running thread is kept
 * when it passes the acceptance rules (docs/sample.md); one that keeps
 * failing them is counted with an <unknown> frame on top of the outer
 * frames that passed (the thread alone when none did): every selected
 * thread counts in every sample. */
PYU_API int pyu_sampler_take(pyu_sampler *sm);
PYU_API void pyu_sampler_stats_get(const pyu_sampler *sm,
                                   pyu_sampler_stats *out);
/* The CPU that runs the thread the last sample found running Python (the
 * thread holding the GIL; on a free-threaded build, or with no holder, the
 * first thread with a stack), through the memory source's thread_cpu:
 * where a caller's sampling thread goes to sit between samples.  A thread
 * read from the CPU it runs on is read while the scheduler has switched it
 * out -- at a random instruction, in one consistent state, as when it is
 * stopped -- where one read from another CPU runs on under the read
 * (docs/sample.md, "Reading a thread from its own CPU").  Returns 0, or
 * -PYU_E_STATE when there is no such thread or source. */
PYU_API int pyu_sampler_cpu(pyu_sampler *sm, int *cpu);
/* Frees the sampler; first clears the anchors it wrote in threads that
 * still exist (a live target).  Accepts NULL. */
PYU_API void pyu_sampler_free(pyu_sampler *sm);

/* ------------------------------------------------------ decoding helpers */

/* The 1-based line of code unit `index` in a CPython 3.11+ location table,
 * starting from first_line.  Returns 0 when the instruction has no line,
 * -1 when index is past the table or the table is malformed. */
PYU_API int pyu_linetable_line(const uint8_t *table, size_t len,
                               int first_line, uint64_t index);

/* Where in the source an instruction comes from, as code.co_positions()
 * says: lines 1-based (line 0: none), columns 0-based UTF-8 byte offsets
 * into their lines; end_line 0 and col/end_col -1 where the table has
 * none. */
typedef struct pyu_position {
    int line, end_line, col, end_col;
} pyu_position;

/* The position of code unit `index` in a CPython 3.11+ location table.
 * Returns 0 (the instruction has no position: out->line 0), or -1 when
 * index is past the table or the table is malformed. */
PYU_API int pyu_linetable_position(const uint8_t *table, size_t len,
                                   int first_line, uint64_t index,
                                   pyu_position *out);

/* Converts `count` characters of `kind` bytes each (1, 2 or 4: a CPython
 * compact string's payload) to UTF-8 in out (NUL-terminated, at most outlen
 * bytes).  Lone surrogates U+DC80..U+DCFF become the raw byte they escape.
 * Returns the number of bytes written (without the NUL), or -1 when kind is
 * invalid or the text does not fit. */
PYU_API long pyu_ucs_to_utf8(const void *data, size_t count, int kind,
                             char *out, size_t outlen);

#ifdef __cplusplus
}
#endif
#endif
