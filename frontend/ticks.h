/* Sampling tick by tick, for the debugger plugins' py-sample --blocking
 * and any target the plugin cannot read directly (a remote one): at each
 * tick the debugger stops the process, one sample is read through the
 * session (through the debugger, often), and the process runs on until the
 * next tick.  A thread of its own asks the debugger to stop the process
 * at the tick's time; it blocks every signal and calls nothing of the
 * debugger's but `stop`.  Everything else runs on the caller's thread,
 * the debugger's.  (The window, window.h, is the other way: the sampler
 * reads a running process from a thread of its own.) */
#ifndef PYUNWIND_FRONTEND_TICKS_H
#define PYUNWIND_FRONTEND_TICKS_H

#include "command.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the debugger supplies, and why the ticks ended. */
typedef struct pyu_cmd_ticks {
    /* in */
    const char *debugger; /* its name: "stopped by gdb at each tick" */
    double duration;      /* s the ticks last; 0: until the process stops
                             for something else */
    double again;         /* s: a stop that did not come is asked for
                             again after this long, until run returns */
    /* From the ticks' thread: ask the debugger to stop the process (kill,
     * a byte on its connection, an asynchronous interrupt: only what is
     * safe from another thread). */
    void (*stop)(void *arg);
    /* Lets the process run until it stops, for whatever reason.  Returns
     * NULL, or why the ticks end now ("interrupted"; a string that lives
     * until the next call). */
    const char *(*run)(void *arg);
    /* After run: NULL when the process stopped for the tick and may run
     * on (fired: stop was called during the run), else why the ticks end
     * ("the inferior exited", "stopped at breakpoint 1"; lives until the
     * next call). */
    const char *(*why)(void *arg, bool fired);
    void *arg;
    /* out */
    char early[256]; /* why the ticks ended early; "" when they did not */
} pyu_cmd_ticks;

/* Samples the stopped process of session s with the options of py-sample
 * (o, parsed for PYU_CMD_DEBUGGER; --blocking is what ticks are) into p:
 * one sample now, then one at each tick of o->rate (a random point of its
 * interval, as the CLI's schedule) until t->duration, the process's end or
 * a stop for something else (t->early says which).  Then completes p's
 * run information (duration, interval, missed ticks) and writes the
 * summary to diag.  Returns PYU_EXIT_OK, or another code with a one-line
 * message when the ticks could not start. */
int pyu_cmd_ticks_run(pyu_session *s, const pyu_cmd_opts *o,
                      pyu_cmd_ticks *t, pyu_profile *p, FILE *diag,
                      char *msg, size_t msglen);

/* When tick n (1, 2, ...) is due, in the clock's seconds: at point jitter
 * ([0, 1)) of its interval, start + period * (n + jitter), and no later
 * than deadline (INFINITY: none).  A period of 0 is due at start: at
 * once. */
double pyu_cmd_tick_due(double start, double period, uint64_t n,
                        double jitter, double deadline);

/* The ticks of a run of duration_ns at one a interval_ns that samples
 * did not serve (0 without an interval). */
uint64_t pyu_cmd_ticks_missed(uint64_t duration_ns, uint64_t interval_ns,
                              uint64_t samples);

#ifdef __cplusplus
}
#endif
#endif
