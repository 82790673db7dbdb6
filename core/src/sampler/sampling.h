/* The sampler's parts, and what they share (private to them):
 *
 *   sampler.c      the loop that joins the others: per sample, per thread,
 *                  read, check, count; the public pyu_sampler_* calls
 *   read_plan.c    what one sample reads: the prediction of the
 *                  interpreter and thread lists, each thread's spans (the
 *                  memory where its frames lay last time), the batched
 *                  read, and a fresh snapshot of one thread
 *   snapshot.c     a thread's chain walked in the copies of one snapshot,
 *                  and its data stack at the thread state's moment
 *   resume.c       generators that had yielded by their copy: the frame
 *                  that resumed each, found by what holds it
 *   links.c        links the copy lost: walk and judge, graft, 3.11's
 *                  eval loops, calls from C code
 *   accept.c       the acceptance rules: when a stack read from a running
 *                  thread is one the thread really had
 *   frame_cache.c  each thread's stack of the last sample (profile nodes
 *                  reused), and CPython 3.15's anchor: the proof that lets
 *                  a sample read only the innermost frame
 *   objects.c      3.9's and 3.10's frame objects: a thread's chain walked
 *                  in the batch's copies, and what tells a torn one
 */
#ifndef PYU_SAMPLING_H
#define PYU_SAMPLING_H

#include "../internal.h"

#define PYU_PLAN_SPANS 8 /* ranges of a thread's frames read with its
                            thread state */
#define PYU_PLAN_EARLY 3 /* innermost frames whose ranges are read first,
                            and the current frame again right after them */
#define PYU_GEN_CALLERS 64 /* generator frames whose last caller a thread
                              remembers (a power of two) */
#define PYU_GEN_RECENT 8 /* generator frames a thread remembers meeting */
#define PYU_SLOT_CALLS 32 /* calls a thread remembers at their slots of the
                             data stack (snapshot.c) */
#define PYU_SLOT_DEPTH 10 /* ... each with the frames between it and the
                             frame below it on the data stack (three
                             generators each resumed from C code through
                             an entry frame, as 3.13t's `for` loops do: 7) */
#define PYU_WIN_EXTRA 6  /* frames outside the data stack read with an
                            anchored thread's window */
#define PYU_GEN_DEPTH 16 /* generators that yielded a walk goes through */
#define PYU_HELD_DEPTH 3 /* generators a frame holds, and those they hold in
                            turn, looked through for a generator */
#define PYU_CFRAMES 8    /* 3.11: recent _PyCFrames of a thread read ahead */
#define PYU_CFWIN 4096   /* 3.11: bytes of C stack read as one range over
                            them at most */
#define PYU_OBJ_RECENT 16 /* 3.9, 3.10: frame objects a thread's stacks had
                             lately, read with its thread state */
#define PYU_OBJ_BINDS 64  /* 3.9, 3.10: frame objects whose code is known */
#define PYU_OBJ_BOUND 16  /* ... seen with one code in this many passed
                             walks in a row: its code's own (objects.c) */
#define PYU_OBJ_REBOUND 1024 /* ... in this many, once seen with two */

/* A frame of a stack read in this sample. */
typedef struct pyu_sframe {
    pyu_frame_raw r;
    uint64_t slot[2]; /* the words at r.sp and after it, from the same
                         copy as the frame (see accept.c) */
    uint8_t nslot;    /* how many of them that copy holds */
    uint16_t ret;     /* return_offset (3.13+), from the same copy */
    bool popped;      /* popped since the thread state was read: its code
                         told by its instruction pointer (sampler.c) */
    bool dead;        /* 3.9, 3.10: its copy had returned (objects.c) */
    bool gen;         /* 3.9, 3.10: a generator's frame object (objects.c) */
    /* the second copy of the innermost frames' ranges, read right after
     * the first (accept.c): the same fields */
    bool twice;
    pyu_frame_raw r2;
    uint64_t slot2[2];
    uint8_t nslot2;
    uint16_t ret2;
} pyu_sframe;

/* A thread's stack of the last sample, base first (frame_cache.c). */
typedef struct pyu_fcache {
    uint64_t *addr, *code, *ip; /* owned */
    uint8_t *own;               /* each frame's owner (PYU_OWNER_*) */
    uint64_t entry;             /* the entry frame (C code called Python)
                                   a stack of it held last, or 0 */
    uint32_t *node;             /* the profile node of the stack up to
                                   each frame */
    size_t n, cap;
    uint64_t epoch;  /* the code epoch its nodes were made under */
    bool valid;
    bool same;       /* the last commit kept the same frames and code
                        objects at every depth (instructions aside) */
    /* CPython 3.15's anchor (last_profiled_frame) and its sequence */
    bool anchored;     /* proven: the anchor named addr[adepth] with `seq`
                          (frames above it read since) */
    size_t adepth;
    uint64_t seq;
    size_t agree;      /* the last commit found the cached frames (address
                          and code) at the depths below this one */
    unsigned calm;     /* proven samples in a row that found the thread in
                          the frame the anchor names, as cached */
    bool wrote;        /* the sampler wrote this thread's anchor */
} pyu_fcache;

/* A generator's resumer that was a generator itself, resumed from C
 * code (resume.c). */
struct pyu_gen_via {
    pyu_frame_raw via;   /* its frame as an accepted stack had it */
    uint64_t under;      /* the frame of the data stack that called the C
                            code, and its code object */
    uint64_t under_code;
};

/* A call met in its slot of the data stack (snapshot.c). */
struct pyu_slot_call {
    pyu_frame_raw r[PYU_SLOT_DEPTH]; /* a frame of the data stack in an
                                        accepted stack, as copied, then the
                                        frames below it down to the next
                                        frame of the data stack
                                        (generators', entry frames) */
    uint8_t n;            /* how many (0: a free entry) */
    uint64_t caller_code; /* the code of that next frame */
    uint64_t size;        /* the first one's bytes on the data stack */
    uint32_t seen;        /* how often it was met (halved now and then) */
};

/* One thread of the prediction. */
typedef struct pyu_sthread {
    uint64_t tstate, thread_id, native_id;
    long pthread;   /* profile thread, or -1 before its first stack */
    pyu_fcache cache;
    /* read_plan.c: where its frames lay, read with its thread state */
    pyu_chunk_span span[PYU_PLAN_SPANS]; /* (local: in spanbuf) */
    size_t nspan;
    size_t nearly;    /* the first spans, holding its innermost frames */
    pyu_chunk_span span2[PYU_PLAN_SPANS]; /* the first nearly ones again,
                                             read a moment later */
    uint64_t cut[PYU_PLAN_EARLY]; /* where the innermost frames started
                                     in them: span2 is read in pieces
                                     cut there, the highest first */
    size_t ncut;
    uint8_t *spanbuf; /* owned */
    size_t spancap;
    bool spans_read;  /* read in this sample's batch */
    /* frame_cache.c: an anchored thread's window, read in the batch right
     * before its thread state: the data stack from the frame the anchor
     * names up to a little past the innermost frame */
    uint8_t *win;     /* owned: the window, then wx[]'s copies, then the
                         window again */
    size_t wincap, win_len;
    uint64_t win_lo;
    uint8_t *win2;    /* in win: the window read again right after it,
                         when it holds more than one frame (else NULL) --
                         the second copy of its frames' evidence, as
                         span2 is of a snapshot's innermost spans */
    pyu_chunk_span wx[PYU_WIN_EXTRA]; /* frames above the anchored one
                         elsewhere (an entry frame on the C stack, a
                         generator's frame), read each as a range */
    size_t nwx;
    bool win_read;    /* read in this sample's batch */
    bool taken;       /* its thread state of this sample's batch is in
                         sm->recs (also when the lists differed from the
                         prediction: pyu_plan_rediscover keeps it) */
    uint64_t again;   /* the current frame read again after the spans (0:
                         not read) */
    uint64_t again_cf, again_at[PYU_CFRAMES]; /* 3.11: what it is read
                         from: the thread state's cframe, and the current
                         frame in each of cframe[] */
    uint64_t chunk, chunk_end; /* its current data-stack chunk */
    uint8_t *cfwin;   /* 3.11: the stretch of C stack that holds the
                         cframes' current frames, read as one range: with
                         the thread state, then again after the spans
                         (2 x PYU_CFWIN bytes; owned, made when needed) */
    uint64_t cfwin_lo[2];
    uint32_t cfwin_len[2]; /* 0: that read took the words one by one */
    struct pyu_loop_entry { /* 3.11: each of cframe[]'s eval loop ... */
        uint64_t frame; /* ... the frame it was last seen entered with
                           (its outermost frame: a generator resumed, a
                           function called from C) */
        uint64_t code;  /* ... the code object it ran, when it was a
                           generator's (a generator's frame lies in the
                           generator: a pipeline made again puts other
                           generators at the same addresses) */
        uint64_t under; /* ... the code of the frame below it then, when
                           it was a generator's (the one that resumed it) */
        uint64_t below; /* ... the cframe of the loop below it then */
    } loop[PYU_CFRAMES];
    uint64_t cframe[PYU_CFRAMES]; /* 3.11: the _PyCFrames it had lately,
                         the last first (one per eval loop on its C stack:
                         a generator resumed from C code runs in one of
                         its own) */
    /* this sample's walk, innermost first */
    pyu_sframe *fr;   /* owned */
    size_t nfr, frcap;
    size_t npopped;   /* the first of them were popped since (sampler.c) */
    uint64_t *gen_memo; /* PYU_GEN_CALLERS (generator frame, the frame that
                         resumed it last) pairs, made when the first is met
                         (resume.c; owned) */
    struct pyu_gen_via *gen_via; /* PYU_GEN_CALLERS, the same slots: where
                         that frame was a generator's resumed from C code,
                         it as copied and the frame of the data stack that
                         called the C code (resume.c; owned) */
    uint64_t gens[PYU_GEN_RECENT]; /* the generators' frames its accepted
                         stacks held lately, the last first (sampler.c) */
    struct pyu_slot_call *slots; /* PYU_SLOT_CALLS calls met lately at
                         their slots of the data stack, made when the
                         first is met (snapshot.c; owned) */
    bool reused;      /* the current frame's slot held another call by its
                         copy (snapshot.c) */
    uint64_t reused_code; /* the code object that judged so, checked with
                         the stack's (sampler.c check_codes()) */
    uint64_t shims[PYU_GEN_RECENT]; /* the entry frames (C stack) they
                         were resumed through, the last first */
    bool unplaced;    /* popped ones were left out: their code could not
                         be told, or their callers had gone past the call */
    pyu_sframe *fr1;  /* the walk from the first current frame, while the
                         one read after the frames is walked (owned) */
    size_t nfr1, fr1cap;
    int end;          /* how the walk ended (PYU_CHAIN_*) */
    size_t outside;   /* frames of it the spans did not hold */
    uint64_t objs[PYU_OBJ_RECENT]; /* 3.9, 3.10: the frame objects its
                         passed walks met lately, the last first (each
                         code's frame object is used again by its next
                         call: a loop's calls come back to the same few) */
    struct pyu_obj_bind { /* 3.9, 3.10: PYU_OBJ_BINDS frame objects, by
                         address, with the code its passed walks saw each
                         run lately, and in how many in a row (owned, made
                         when the first walk passes: objects.c) */
        uint64_t addr, code;
        uint32_t runs, moves; /* (moves: times seen with another code) */
    } *binds;
} pyu_sthread;

typedef struct thread_read thread_read;

/* What reading one thread gave. */
enum { THREAD_SKIP, THREAD_HIT, THREAD_READ };

struct thread_read { /* (sampler.c, links.c, snapshot.c) */
    int what;       /* THREAD_* */
    unsigned status;
    long ok;        /* THREAD_READ: the outermost frames of t->fr that
                       passed (t->nfr: all) */
    const pyu_interp *in;
    bool leaf_unknown; /* THREAD_READ: the innermost frame could not be
                          told: <unknown> on the frames that passed */
    bool imputed;      /* THREAD_READ: the innermost frames are those met
                          lately in that slot (pyu_snap_slot_call()) */
};

/* One interpreter of the prediction. */
typedef struct pyu_sinterp {
    pyu_interp in;
    pyu_interp_read ir;
    size_t first, n; /* its threads in sm->threads */
} pyu_sinterp;

/* A function object's code object, as last read (accept.c). */
#define PYU_FUNCS_MEMO 1024
typedef struct pyu_func_slot {
    uint64_t func, code;
} pyu_func_slot;

/* Whether a code object names another's function (accept.c). */
#define PYU_NAMES_MEMO 4096
typedef struct pyu_names_slot {
    uint64_t caller, callee;
    bool yes;
} pyu_names_slot;

/* A code object's calls by name (3.9, 3.10; accept.c). */
#define PYU_SITES_MEMO 512
#define PYU_SITES_MAX 256 /* calls of a code object remembered */
typedef struct pyu_sites_slot {
    uint64_t code;       /* 0: free */
    uint32_t n;
    pyu_call_site *site; /* owned: n of them, in code order */
} pyu_sites_slot;
/* Whether a caller at an instruction can have called a name before
 * (pyu_code_reaches: 1, 0, -1; accept.c). */
#define PYU_REACH_MEMO 4096
typedef struct pyu_reach_slot {
    uint64_t code, name; /* code 0: free */
    uint32_t at;
    int8_t reached;
} pyu_reach_slot;

/* The acceptance rules' memo: what instruction a frame stands at, by
 * (code object, instruction pointer). */
typedef struct pyu_kind_slot {
    uint64_t code; /* 0: free */
    uint64_t ip;
    uint8_t kind;  /* PYU_AT_* */
} pyu_kind_slot;

struct pyu_sampler {
    pyu_session *s;
    pyu_profile *p;
    pyu_sampler_opts o;
    pyu_sampler_stats st;
    bool anchors;      /* the target has anchors and we may write them */
    bool read_anchors; /* the target has anchors (3.15.0b4+) */
    bool code_gen;     /* the target reports freed code objects */
    size_t fsize, tslen;
    uint64_t extra_off[2]; /* the anchor and its sequence in a thread
                              state copy (pyu_tstate.extra) */
    bool indirect;     /* 3.11: the current frame is in the _PyCFrame */
    bool shims;        /* 3.12: the indirect version whose eval loops
                          push entry frames on the C stack */
    /* 3.12: an eval loop's entry frame and its _PyCFrame are two locals
     * of one C function, at one distance in a build (links.c) */
    int64_t shim_delta;  /* the entry frame less the _PyCFrame */
    uint64_t shim_code;  /* the code an entry frame runs */
    unsigned shim_seen;  /* walks that showed both, in a row */
    bool one_copy;     /* the frames judged were copied once, with no
                          second copy of the innermost (accept.c) */
    long gc_frame, native_frame, unknown_frame; /* profile frames of <GC>,
                                                   <native>, <unknown> */
    char proc_name[64]; /* the process's name: a thread with the same name
                           has none of its own */
    uint32_t process; /* its target in the profile's processes */
    /* the prediction (read_plan.c): interpreters and threads in list
     * order */
    pyu_sinterp *interps;
    size_t ninterps, capinterps;
    pyu_sthread *threads;
    size_t nthreads, capthreads;
    bool predicted;
    uint8_t *ispan;    /* each interpreter's fields, one range each */
    size_t ispan_off, ispan_len; /* (0: the fields are far apart) */
    uint64_t head;     /* the runtime's interpreter list head, as read */
    /* per-sample buffers (read_plan.c) */
    pyu_range *ranges;
    size_t capranges;
    uint8_t *tsbuf;    /* nthreads thread state copies */
    size_t captsbuf;
    uint64_t *next;    /* each thread state's next, as read */
    uint64_t *cfpeek;  /* 3.11: each thread's current frame, read at each
                          of its recent cframes (PYU_CFRAMES a thread) */
    pyu_tstate *recs;
    /* accept.c */
    pyu_kind_slot *kinds;
    size_t kindcap, kindn;
    uint64_t kind_epoch;
    uint64_t none_addr; /* None, once met as a frame's function (a shim) */
    uint64_t gen_off;   /* where a generator object keeps its frame, once
                           found (before 3.14; sampler.c) */
    uint64_t pick; /* snapshot.c: the state of its choices (xorshift) */
    pyu_names_slot names[PYU_NAMES_MEMO];
    uint64_t names_epoch;
    pyu_sites_slot *sites; /* owned: PYU_SITES_MEMO of them, once needed */
    pyu_reach_slot *reach; /* owned: PYU_REACH_MEMO of them, with sites */
    uint64_t sites_epoch;
    pyu_func_slot funcs[PYU_FUNCS_MEMO]; /* function -> its code object */
    unsigned funcs_next;
    /* sampler.c: (code object, instruction) -> profile frame; each
     * thread's result in this sample */
    struct pyu_memo_slot *memo;
    size_t memocap, memon;
    uint64_t memo_epoch;
    thread_read *reads;
    size_t capreads;
    uint64_t spare_from; /* the session's reads when this read of a
                            thread's stack began (pyu_spent()) */
    uint64_t running;    /* the native id of the thread the last sample
                            found running Python (pyu_sampler_cpu), or 0 */
};

/* Reads a stack's read may make beyond its snapshot to find what the
 * copy lost (links.c, resume.c) before it gives up and takes a fresh
 * snapshot.  Each read costs 2-4 us, and the thread moves on meanwhile:
 * a stack found after many reads is of a later moment than its tick.
 * Measured on the standard library loop (3.15.2, target and sampler on
 * separate CPUs): 5 % of the samples made 16-150 reads and took 50-400 us
 * to read, and went where the program was by then.  The bound makes the
 * worst sample a hundred or two microseconds late, not several hundred.
 * 24 was too few for the free-threaded 3.13's generator pipelines, each
 * generator resumed through C code and found by what holds it: 3.13t
 * generators 0.02 from the reference with no bound, 0.03-0.05 with 24,
 * 0.02 with 64 (bench/README.md). */
#define PYU_SPARE_READS 64

/* Whether this read of a thread's stack has made its spare reads. */
static inline bool pyu_spent(const pyu_sampler *sm)
{
    return sm->s->reads - sm->spare_from > PYU_SPARE_READS;
}

/* ------------------------------------------------------- read_plan.c */

/* The one read of a sample: the interpreter list's head (now and then),
 * each interpreter's fields, and per thread its thread state with the
 * memory its frames are predicted in (or, for a thread whose 3.15 anchor
 * proves its stack, the innermost frame before its thread state).
 * Returns 1 when the lists are as predicted (sm->recs filled), 0 when not
 * (each thread read is still taken into sm->recs, for pyu_plan_rediscover
 * to keep), -1 on an error (record set). */
PYU_HIDDEN int pyu_plan_batch(pyu_sampler *sm);
/* Reads the interpreter and thread lists in full and makes them the
 * prediction (threads known before keep their caches); the thread states
 * as read go into sm->recs, for a sample whose batch missed (each thread
 * then reads a snapshot of its own).  0 or -1. */
PYU_HIDDEN int pyu_plan_rediscover(pyu_sampler *sm);
/* Sets t's spans from its walk in t->fr: where its frames lay (the
 * current chunk from its start to a little past the innermost frame it
 * holds, the frames elsewhere: older chunks, generators, entry frames on
 * the C stack, each with its value stack's top), in ranges ordered by the
 * innermost frame each holds.  False when there is nothing to predict
 * from or no room (frames are then read as found). */
PYU_HIDDEN bool pyu_plan_spans(pyu_sampler *sm, pyu_sthread *t);
/* A fresh snapshot of one thread: its thread state (into tsbuf, decoded
 * into *ts) and its spans in one read.  0, 1 when the thread state could
 * not be read, -1 when the process is gone (record set). */
PYU_HIDDEN int pyu_plan_snapshot(pyu_sampler *sm, const pyu_interp *in,
                                 pyu_sthread *t, pyu_tstate *ts,
                                 uint8_t *tsbuf);
/* 3.11: the index of cframe cf among t's recent ones, or PYU_CFRAMES. */
PYU_HIDDEN size_t pyu_plan_loop_of(const pyu_sthread *t, uint64_t cf);
/* 3.11: the current frame of t's recent cframe cf in the copy of the
 * batch or snapshot that gave its thread state, or 0. */
PYU_HIDDEN uint64_t pyu_plan_loop_word(const pyu_sampler *sm,
                                       const pyu_sthread *t, uint64_t cf);
/* Notes where the thread's current chunk ends. */
PYU_HIDDEN void pyu_plan_note_chunk(pyu_sampler *sm, pyu_sthread *t,
                                    uint64_t chunk);
PYU_HIDDEN void pyu_plan_thread_free(pyu_sthread *t);
PYU_HIDDEN void pyu_plan_free(pyu_sampler *sm);

/* ------------------------------------------------------- snapshot.c */

/* Walks t's chain from `first` after the frames t holds (from none:
 * pyu_snap_walk), in its spans when they were read with ts (`spans`).
 * 0, or -1 on an error that ends the sample. */
PYU_HIDDEN int pyu_snap_walk_on(pyu_sampler *sm, pyu_sthread *t,
                                const pyu_tstate *ts, uint64_t first,
                                bool spans);
PYU_HIDDEN int pyu_snap_walk(pyu_sampler *sm, pyu_sthread *t,
                             const pyu_tstate *ts, uint64_t first,
                             bool spans);
/* Runs the chain walk `it` with fn (pyu_chain_each) for t, and records how
 * it ended and what it read.  0, or -1 on an error that ends the sample. */
PYU_HIDDEN int pyu_snap_chain(pyu_sampler *sm, pyu_sthread *t,
                              pyu_chain_it *it,
                              int (*fn)(void *arg, const pyu_frame_raw *f,
                                        const uint8_t *buf, size_t avail),
                              void *arg);
/* 3.15: walks t's chain from `first` down to the anchored frame (cached at
 * depth k) in its window: 1 got there, 2 `first` is that frame and
 * returned by its copy, 0 not, -1 on an error. */
PYU_HIDDEN int pyu_snap_walk_window(pyu_sampler *sm, pyu_sthread *t,
                                    uint64_t first, size_t k);
/* Makes t's window its spans (of this sample).  Whether it could. */
PYU_HIDDEN bool pyu_snap_window_spans(pyu_sthread *t);
/* The copy of len bytes at addr in t's spans (with how many follow addr),
 * or NULL. */
PYU_HIDDEN const uint8_t *pyu_snap_in_spans(const pyu_sthread *t,
                                            uint64_t addr, size_t len,
                                            size_t *avail);
/* Sets what frame sf's copy buf (avail bytes of it) holds of its
 * caller's evidence (accept.c): the words at its saved stack top, its
 * return offset, and, when second and buf lies in a range of t's read
 * twice, the same from the second copy. */
PYU_HIDDEN void pyu_snap_evidence(const pyu_sampler *sm,
                                  const pyu_sthread *t, pyu_sframe *sf,
                                  const uint8_t *buf, size_t avail,
                                  bool second);
/* n bytes at addr into buf: from t's spans, else read now. */
PYU_HIDDEN bool pyu_snap_bytes(pyu_sampler *sm, const pyu_sthread *t,
                               uint64_t addr, void *buf, size_t n);
/* Whether f is a frame of the data-stack chunk of ts's moment. */
PYU_HIDDEN bool pyu_snap_in_top_chunk(const pyu_sthread *t,
                                      const pyu_tstate *ts,
                                      const pyu_frame_raw *f);
/* The bytes code's frames take on the data stack, or 0. */
PYU_HIDDEN uint64_t pyu_snap_frame_size(pyu_sampler *sm, uint64_t code);
/* Remembers the calls of t's accepted stack that lie on the data stack,
 * by their slot, size and the frame of the data stack below them. */
PYU_HIDDEN void pyu_snap_learn_slots(pyu_sampler *sm, pyu_sthread *t);
/* One of the calls t met lately in the slot at addr, size bytes, above a
 * frame of the data stack running caller_code (and through the frames
 * fr[0..n), the slot's own first, when n; under the frame `above`, when
 * not NULL: its innermost frame may call it, pyu_accept_named()), each as
 * likely as it was met, copied into *out (t's table is written by the
 * next accepted walk, pyu_links_judge(), which a caller may make before
 * it is done with the call).  Whether one was met. */
PYU_HIDDEN bool pyu_snap_slot_call(pyu_sampler *sm, const pyu_sthread *t,
                                   uint64_t addr, uint64_t size,
                                   uint64_t caller_code, const pyu_sframe *fr,
                                   size_t n, const pyu_sframe *above,
                                   struct pyu_slot_call *out);
/* Makes room for m frames in t's walk at its index `at` (zeroed, the
 * frames from there on after them).  0, or -1 when out of memory. */
PYU_HIDDEN int pyu_snap_make_room(pyu_sampler *sm, pyu_sthread *t, size_t at,
                                  size_t m);
/* Puts the frames of the call x on t's walk, whose innermost frame is the
 * one right below x's slot: taken for the call the thread state's moment
 * had there (r: imputed, read again next time).  0, or -1 when out of
 * memory. */
PYU_HIDDEN int pyu_snap_put_slot_call(pyu_sampler *sm, pyu_sthread *t,
                                      thread_read *r,
                                      const struct pyu_slot_call *x);
/* Whether the innermost of the frames fr[0..n) that lies on the data
 * stack ends at its top of the thread state's moment (what the thread
 * ran then was that frame, or generators and C code above it). */
PYU_HIDDEN bool pyu_snap_ends_at_top(pyu_sampler *sm, const pyu_sthread *t,
                                     const pyu_tstate *ts,
                                     const pyu_sframe *fr, size_t n);
/* A walk whose innermost frames agree among themselves and end at the
 * top of the data stack of the thread state's moment, the outermost of
 * them called from a slot whose copy holds a later call there, of another
 * size (the frames below are copied after those above:
 * `json.loads(json.dumps(x))`, a sample in `dumps` copies `loads` in its
 * slot): the call met lately in that slot, of the size from it to the
 * frame above, over the frame below it, goes in its place (r: imputed).
 * 1 when it did, 0 when not, -1 on an error. */
PYU_HIDDEN int pyu_snap_slot_between(pyu_sampler *sm, pyu_sthread *t,
                                     const pyu_tstate *ts, thread_read *r);
/* The frame of the data stack right below the one at addr (0: below its
 * top) at the thread state's moment, or 0 when it cannot be told. */
PYU_HIDDEN uint64_t pyu_snap_frame_under(pyu_sampler *sm, pyu_sthread *t,
                                         const pyu_tstate *ts,
                                         uint64_t addr);
/* Swaps t's walk with the one kept aside (t->fr1). */
PYU_HIDDEN void pyu_snap_swap_walks(pyu_sthread *t);
/* Counts a stack taken from a walk that met popped frames. */
PYU_HIDDEN void pyu_snap_note_popped(pyu_sampler *sm, const pyu_sthread *t);
/* Leaves out t's n innermost (popped) frames; the frames left. */
PYU_HIDDEN long pyu_snap_drop_popped(pyu_sthread *t, size_t n);

/* ---------------------------------------------------------- objects.c */

/* Whether the frame object copied in buf (fsize bytes) was running when
 * copied (its eval loop's mark; true when the version has none). */
PYU_HIDDEN bool pyu_objects_running(const pyu_offsets *o, const uint8_t *buf,
                                    size_t fsize);
/* Walks t's chain of frame objects from ts's current frame into t->fr, in
 * its spans when they were read with ts (`spans`), the rest read alone.
 * 1 when the walk passed (every frame below the innermost running, the
 * chain's end reached), 0 when not, -1 on an error that ends the sample. */
PYU_HIDDEN int pyu_objects_walk(pyu_sampler *sm, pyu_sthread *t,
                                const pyu_tstate *ts, bool spans);

/* --------------------------------------------------------- resume.c */

/* The generator (or coroutine) object whose frame is at frame, or 0. */
PYU_HIDDEN uint64_t pyu_resume_gen_object(pyu_sampler *sm, uint64_t frame);
/* Whether frame f holds obj in a local or under its saved stack top
 * (`whole`: anywhere in its frame). */
PYU_HIDDEN bool pyu_resume_holds(pyu_sampler *sm, const pyu_sthread *t,
                                 const pyu_frame_raw *f, uint64_t obj,
                                 bool whole);
/* The frames of generators f holds (in turn) down to one whose frame holds
 * gen, into mid[] (the outermost first): how many, 0 when none. */
PYU_HIDDEN size_t pyu_resume_held_gen(pyu_sampler *sm, const pyu_sthread *t,
                                      const pyu_frame_raw *f, uint64_t gen,
                                      pyu_sframe mid[PYU_HELD_DEPTH],
                                      size_t depth, bool whole);
/* Whether frame f of the data stack can have resumed the generator that
 * ends the walk fr (n frames) at the thread state's moment: it lies right
 * under the walk's frames there (or the top).  True when not known. */
PYU_HIDDEN bool pyu_resume_right_under(pyu_sampler *sm, const pyu_sthread *t,
                                       const pyu_tstate *ts,
                                       const pyu_frame_raw *f,
                                       const pyu_sframe *fr, size_t n);
/* Puts the u innermost frames of the walk kept aside, then mid[]'s via
 * frames, on t's walk from its frame x on.  0, or -1 out of memory. */
PYU_HIDDEN int pyu_resume_stack_on(pyu_sampler *sm, pyu_sthread *t, size_t u,
                                   const pyu_sframe *mid, size_t via,
                                   size_t x);
/* Remembers who resumed each generator frame of t's accepted stack. */
PYU_HIDDEN void pyu_resume_learn(pyu_sthread *t);
/* Goes on with a walk that ended at a generator that had yielded, from
 * its resumer.  0, or -1 on an error. */
PYU_HIDDEN int pyu_resume_walk(pyu_sampler *sm, pyu_sthread *t,
                               const pyu_tstate *ts, bool spans);

/* ---------------------------------------------------------- links.c */

/* Walks t's chain from `first`, on through the generators that had
 * yielded.  0, or -1. */
PYU_HIDDEN int pyu_links_walk_whole(pyu_sampler *sm, pyu_sthread *t,
                                    const pyu_tstate *ts, uint64_t first,
                                    bool spans);
/* Judges t's walk by the acceptance rules: 1 passed whole, 0 not, -1. */
PYU_HIDDEN int pyu_links_judge(pyu_sampler *sm, pyu_sthread *t,
                               const pyu_tstate *ts, thread_read *r);
/* A walk that ended at a generator that had yielded, no resumer found,
 * whose frames on the data stack are those up to the top of the thread
 * state's moment: the call of its outermost one of them, met lately in
 * its slot through the same generators, and on through the frames met
 * there between them and the frame of the data stack below, is put on
 * the walk from that frame (r: imputed).  1 when it was, 0 when not (t's
 * walk as it was), -1 on an error. */
PYU_HIDDEN int pyu_links_as_met(pyu_sampler *sm, pyu_sthread *t,
                                const pyu_tstate *ts, bool spans,
                                thread_read *r);
/* The first walk's innermost frames (t->fr1) put on the walk from the
 * current frame read after the frames (t->fr) where a frame of it holds
 * or called them.  0, or -1. */
PYU_HIDDEN int pyu_links_graft(pyu_sampler *sm, pyu_sthread *t,
                               const pyu_tstate *ts);
/* 3.12: the frames of the data stack above the passed walk from the
 * current frame read after the frames, up to the thread state's top, put
 * on it: 1 passed, 0 not (t's walk kept), -1. */
PYU_HIDDEN int pyu_links_later_top(pyu_sampler *sm, pyu_sthread *t,
                                   const pyu_tstate *ts, bool spans,
                                   thread_read *r);
/* 3.11: the walk made from the entry frame of the loop the thread state
 * names: 1 passed, 0 not, -1. */
PYU_HIDDEN int pyu_links_from_entry(pyu_sampler *sm, pyu_sthread *t,
                                    const pyu_tstate *ts, bool spans,
                                    thread_read *r);
/* 3.12: notes where an accepted walk from the loop's word put the loop's
 * entry frame. */
PYU_HIDDEN void pyu_links_learn_shim(pyu_sampler *sm, const pyu_sthread *t,
                                     const pyu_tstate *ts);
/* 3.12: the walk of the thread state's moment from the entry frame of
 * the loop it names: 1 passed, 0 not, -1. */
PYU_HIDDEN int pyu_links_from_shim(pyu_sampler *sm, pyu_sthread *t,
                                   const pyu_tstate *ts, bool spans,
                                   thread_read *r);
/* 3.11: makes an accepted walk agree with its thread state's moment.
 * 0, 1 when the walk is of another loop than the thread state's and
 * that loop's cannot be made (r->ok 0: rejected), or -1. */
PYU_HIDDEN int pyu_links_settle(pyu_sampler *sm, pyu_sthread *t,
                                const pyu_tstate *ts, bool spans,
                                thread_read *r);
/* A walk whose link below its innermost frames is gone (C code called
 * them) put on the frame below them on the data stack: 1 passed, 0 not,
 * -1. */
PYU_HIDDEN int pyu_links_from_below(pyu_sampler *sm, pyu_sthread *t,
                                    const pyu_tstate *ts, bool spans,
                                    thread_read *r);

/* --------------------------------------------------------- accept.c */

/* What a frame's current instruction is, as the caller of the frame above
 * it (the memo's kinds). */
enum {
    PYU_AT_UNKNOWN = 0, /* not looked at yet */
    PYU_AT_CALL,        /* a call: the callee's function object lies at
                           the top of the caller's saved value stack */
    PYU_AT_PUSH,        /* another instruction that pushes a frame
                           (attribute, subscript, generator, __init__'s
                           shim, instrumented): no such evidence */
    PYU_AT_OTHER,       /* an instruction that pushes no frame */
    PYU_AT_RETURN,      /* a return: the frame is ending */
};

/* Checks a chain read from one snapshot, t->fr[0..t->nfr) innermost
 * first, walked to t->end (see accept.c for the rules).  Returns how many
 * of its outermost frames are consistent: t->nfr when the whole stack is
 * one the thread had; fewer, when the frames above cannot be trusted;
 * -1 on an error that ends the sample (record set). */
PYU_HIDDEN long pyu_accept_chain(pyu_sampler *sm, pyu_sthread *t,
                                 const pyu_tstate *ts);
/* The words at a frame's saved stack top (sp) in a copy of avail bytes
 * of the frame at addr from buf: how many of slot[2] it holds. */
PYU_HIDDEN uint8_t pyu_sframe_slots(uint64_t addr, uint64_t sp,
                                    const uint8_t *buf, size_t avail,
                                    uint64_t slot[2]);
/* A frame's return_offset (3.13+; 0 before), from a copy of it. */
PYU_HIDDEN uint16_t pyu_sframe_ret(const pyu_sampler *sm,
                                   const uint8_t *buf);
/* Whether frame f, as copied, stands at a return (its function ending or
 * ended: a generator's, whose previous is cleared then). */
PYU_HIDDEN bool pyu_accept_returning(pyu_sampler *sm,
                                     const pyu_frame_raw *f);
/* Whether frame f, as copied, is being popped or popped (3.14+). */
PYU_HIDDEN bool pyu_frame_popped(pyu_session *s, const pyu_frame_raw *f);
/* The same for frames fr[0..n) (innermost first) whose outermost is known
 * to be on the thread's stack: how many of the outermost pass the frame
 * and link rules, or -1. */
PYU_HIDDEN long pyu_accept_links(pyu_sampler *sm, const pyu_sframe *fr,
                                 size_t n);
/* Whether caller c, a frame of another moment (no copy of its stack to
 * show a pending call), may have called frame e: by C code, or by a name
 * its code loads.  Reads nothing but c's code object. */
PYU_HIDDEN bool pyu_accept_named(pyu_sampler *sm, const pyu_frame_raw *c,
                                 const pyu_sframe *e);
/* Whether caller c, a frame object (3.9, 3.10), cannot have called
 * frame e: its code calls e's name, and c stands where no call of that
 * name can have been made before in the same run of the frame (a torn
 * walk: e is no callee of this c).  Not told when c's code does not call
 * e's name (a callback of C code, a decorated function), nor of a
 * generator's frame (resumed wherever its generator went).  Reads c's
 * bytecode once per code object, and once per new question. */
PYU_HIDDEN bool pyu_accept_uncalled(pyu_sampler *sm, const pyu_frame_raw *c,
                                     const pyu_sframe *e);
/* Caller c (a frame object) copied after its callee e had returned, at a
 * later moment of its own: the one instruction (code units) of c's code
 * that calls e's name, when c's copy is at none of them; else
 * PYU_INSTR_UNKNOWN (no such call, several, or c at one). */
PYU_HIDDEN uint32_t pyu_accept_call_of(pyu_sampler *sm, const pyu_frame_raw *c,
                                       const pyu_sframe *e);
/* pyu_accept_named(), or caller c stands at an instruction that pushes a
 * frame without a call (a generator's resumption, a getter: accept.c). */
PYU_HIDDEN bool pyu_accept_vouched(pyu_sampler *sm, const pyu_frame_raw *c,
                                   const pyu_sframe *e);
/* How many of the innermost frames of fr[0..n) pass the rules among
 * themselves (counted from the innermost), or -1 on an error. */
PYU_HIDDEN long pyu_accept_upper(pyu_sampler *sm, const pyu_sframe *fr,
                                 size_t n);

PYU_HIDDEN void pyu_accept_free(pyu_sampler *sm);

/* ------------------------------------------------------ frame_cache.c */

/* Makes the cached stack: positions [0, keep) stay, the nf frames of fr
 * (innermost first) go on top; a frame identical to the cached one at its
 * depth, with everything below it identical too, keeps its node.  With
 * Returns 0, 1 when a frame's code object could not be read, or -1
 * (record set). */
PYU_HIDDEN int pyu_fcache_commit(pyu_sampler *sm, pyu_sthread *t,
                                 const pyu_sframe *fr, size_t keep,
                                 size_t nf, bool reuse);
/* The node of the thread's innermost frame: its cached stack's, with
 * <unknown> on top when asked, and <GC> when the status says so. */
PYU_HIDDEN long pyu_fcache_leaf(pyu_sampler *sm, const pyu_sthread *t,
                                bool unknown, unsigned status);
/* 3.15: plans the window of an anchored thread (t->win_lo, t->win_len,
 * its buffer made); false when the thread is not anchored or has no
 * window (out of memory). */
PYU_HIDDEN bool pyu_fcache_window(pyu_sampler *sm, pyu_sthread *t);
/* 3.15: how many of the thread's cached frames, from its base, the thread
 * state copy ts proves unchanged (the frame the anchor names and all
 * below it), or 0. */
PYU_HIDDEN size_t pyu_fcache_proven(pyu_sthread *t, const pyu_tstate *ts);
/* 3.15: commits the k proven frames with t->fr on top (innermost first,
 * its outermost the frame the anchor names, cached at k - 1; none: that
 * frame as cached), as ts showed them: 1 when done, 0 when a code object
 * could not be read, -1 (record set). */
PYU_HIDDEN int pyu_fcache_take(pyu_sampler *sm, pyu_sthread *t,
                               const pyu_tstate *ts, size_t k);
/* 3.15: after a stack read whole from a snapshot and accepted (and
 * committed), sets up the anchor: proves the cache when the anchor written
 * last time still names the innermost frame of the same stack, or writes
 * it when the stack is the one the last sample read. */
PYU_HIDDEN void pyu_fcache_settle(pyu_sampler *sm, pyu_sthread *t,
                                  const pyu_tstate *ts);
/* Whether the sampler wrote an anchor into any thread. */
PYU_HIDDEN bool pyu_fcache_wrote(const pyu_sampler *sm);
/* Clears the anchors the sampler wrote, in its threads (the caller has
 * made them the threads the runtime still lists). */
PYU_HIDDEN void pyu_fcache_clear_anchors(pyu_sampler *sm);
PYU_HIDDEN void pyu_fcache_free(pyu_fcache *c);

/* (frame_memo.c) The profile frame of a Python frame: -1 when its
 * executable is not a code object (not a Python frame), -2 on an error
 * (record set). */
PYU_HIDDEN long pyu_sampler_frame_of(pyu_sampler *sm, const pyu_frame_raw *f);
/* The profile frame of function func at instruction instr of c (whose
 * bytecode lies at `bytecode` in the target); negative on no memory. */
PYU_HIDDEN long pyu_sampler_add_frame(pyu_sampler *sm, uint32_t func,
                                      const pyu_code *c, uint32_t instr,
                                      uint64_t bytecode);

#endif
