/* A sampling window, for the debugger plugins' py-sample: the sampler runs
 * in a thread of its own, reading the process directly, while the debugger
 * runs the inferior; when the window's duration ends (or the target does)
 * that thread asks the debugger to stop the inferior, and the debugger's
 * thread then ends the window.  The thread blocks every signal and calls
 * nothing of the debugger's but `interrupt`. */
#ifndef PYUNWIND_FRONTEND_WINDOW_H
#define PYUNWIND_FRONTEND_WINDOW_H

#include "command.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pyu_cmd_window pyu_cmd_window;

/* Starts sampling process pid with the options of py-sample (o, parsed
 * for PYU_CMD_DEBUGGER) into p.  interrupt(arg) is called from the
 * window's thread when the duration ends.  Returns PYU_EXIT_OK, or
 * another code with a one-line message. */
int pyu_cmd_window_start(int pid, const pyu_cmd_opts *o, pyu_profile *p,
                         void (*interrupt)(void *arg), void *arg,
                         pyu_cmd_window **out, char *msg, size_t msglen);

/* Ends the window (the inferior has stopped, whatever stopped it) and
 * waits for its thread.  *timed_out: its duration ended it.  Returns the
 * run's PYU_EXIT_* code (a message in msg when not OK). */
int pyu_cmd_window_end(pyu_cmd_window *w, bool *timed_out, char *msg,
                       size_t msglen);

/* Whether the window wrote its profile itself: --format raw -o FILE is
 * streamed to FILE while it samples (as the CLI's), so the caller writes
 * nothing more. */
bool pyu_cmd_window_streamed(const pyu_cmd_window *w);

/* The summary the run wrote (valid until the window is freed). */
const char *pyu_cmd_window_diag(const pyu_cmd_window *w);

void pyu_cmd_window_free(pyu_cmd_window *w);

#ifdef __cplusplus
}
#endif
#endif
