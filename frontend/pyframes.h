/* The debugger commands a user of CPython's python-gdb.py types by habit
 * (py-bt, py-bt-full, py-up, py-down, py-list, py-locals, py-print), as
 * text: one thread's Python frames of a dump taken with PYU_WALK_LOCALS,
 * and an index among them (0 = the innermost).  The gdb and the lldb
 * plugins both print these bytes; which
 * frame is selected, and how Python frames map to the debugger's native
 * frames, is the front end's business.
 *
 * Functions that can fail return a PYU_EXIT_* code, with a one-line
 * message (no newline) in msg, ready to be shown as the debugger's error:
 * it starts with the command's name ("py-list: cannot read x.py: ...")
 * unless it copies python-gdb.py's own text ("'name' not found"). */
#ifndef PYUNWIND_FRONTEND_PYFRAMES_H
#define PYUNWIND_FRONTEND_PYFRAMES_H

#include "pyunwind/pyunwind.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One frame as py-up, py-down and py-bt-full head it: "#K File "x.py",
 * line 12, in func", then its source line, stripped, indented by four
 * spaces (or why it is not shown: the file changed after the process
 * started; nothing when the file cannot be read). */
void pyu_pyframes_frame(FILE *out, const pyu_dump *d, const pyu_thread *t,
                        size_t k);

/* py-bt: "Traceback (most recent call first):", then each frame,
 * innermost first, as "  File "x.py", line 12, in func" and its source
 * line; the selected frame's line starts with "* " instead of two
 * spaces (selected: an index; none when it is t->nframes or more).
 * full (py-bt-full): each frame as pyu_pyframes_frame heads it, and its
 * variables as `py-dump --locals` shows them.  A stack the walk cut
 * short ends with a line saying so. */
void pyu_pyframes_bt(FILE *out, const pyu_dump *d, const pyu_thread *t,
                     size_t selected, int full);

/* py-list: lines first..last (1-based, inclusive) of frame k's source
 * file, each as "%4s    %s" with the frame's line numbered ">N"; first 0:
 * five lines before the frame's line to five after it.  Fails when the
 * file cannot be read or changed after the process started (or the core
 * was written). */
int pyu_pyframes_list(FILE *out, const pyu_dump *d, const pyu_thread *t,
                      size_t k, int first, int last, char *msg,
                      size_t msglen);

/* py-locals: frame k's variables, one "name = value" line each, the
 * arguments first, values as `py-dump --locals` shows them.  Fails when
 * they cannot be read. */
int pyu_pyframes_locals(FILE *out, const pyu_dump *d, const pyu_thread *t,
                        size_t k, char *msg, size_t msglen);

/* py-print EXPR: "<scope> 'EXPR' = value" (scope "local", "global" or
 * "builtin", EXPR quoted as Python's repr quotes a str), EXPR looked up in
 * frame k as pyu_frame_lookup does, reading the target through s (which
 * must be stopped as the dump saw it).  With s NULL, or a frame whose
 * address the dump lacks, only the frame's own variables are looked up,
 * in the dump.  Fails with pyu_frame_lookup's message ("'NAME' not
 * found", ...). */
int pyu_pyframes_print(FILE *out, pyu_session *s, const pyu_dump *d,
                       const pyu_thread *t, size_t k, const char *expr,
                       char *msg, size_t msglen);

/* The entry frames of thread tid (native thread id), as the debuggers
 * place Python frames under the native frames of the eval loop: entry[k]
 * is the address of the entry frame that follows Python frame k (the
 * innermost first), which lives on the native stack of the eval-loop call
 * that runs frame k; 0 for frames no entry frame follows.  The frames
 * are those of every thread state of the thread (one per interpreter it
 * runs: a thread that runs a subinterpreter has two), one after the
 * other in the walk's order, as a dump lists them.  Fills
 * entry[0..n), zeroing what the walk did not reach.  Reads the target
 * again (one pyu_walk with PYU_WALK_ENTRY_FRAMES): call it on a stopped
 * process.  Before 3.11 there are no entry frames: each Python frame runs
 * in a call of the eval function of its own (_PyEval_EvalFrameDefault),
 * and entry[k] is PYU_ENTRY_BY_NAME for each frame of the thread: the
 * eval function's native frames, innermost first, run one each.
 * Returns 0; 1 when the walk found no thread tid; or a negated error
 * (message in pyu_errmsg). */
#define PYU_ENTRY_BY_NAME 1
int pyu_pyframes_entries(pyu_session *s, uint64_t tid, uint64_t *entry,
                         size_t n);

#ifdef __cplusplus
}
#endif
#endif
