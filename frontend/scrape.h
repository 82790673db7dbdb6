/* Scrapes: profiles of running targets over windows of their own, for
 * `pyunwind serve`.  Each target has one sampling loop, a thread that runs
 * while some scrape wants the target and ends when none does; every
 * scrape of that target at the same moment is fed from it: the loop takes
 * a sample when the earliest scrape is due, and hands its counts to each
 * scrape that is due by then (at its own rate, in its own mode), so that
 * two scrapers of one process cost it one sampler, not two.  A scrape of
 * several targets is fed by each one's loop, each target a process of its
 * profile.  Nothing here knows HTTP. */
#ifndef PYUNWIND_FRONTEND_SCRAPE_H
#define PYUNWIND_FRONTEND_SCRAPE_H

#include "pyunwind/pyunwind.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pyu_scrapes pyu_scrapes;
typedef struct pyu_scrape pyu_scrape;

/* The loops of a server; NULL when out of memory.  log (NULL: none)
 * gets a line when a loop starts and when it ends. */
pyu_scrapes *pyu_scrapes_new(FILE *log);
/* Ends every loop: the scrapes under way end with what they have (their
 * done called), and later ones cannot start.  The targets run on. */
void pyu_scrapes_stop(pyu_scrapes *ss);
/* Stops them (pyu_scrapes_stop) and frees them; free every scrape
 * first. */
void pyu_scrapes_free(pyu_scrapes *ss);

/* What a scrape asks. */
typedef struct pyu_scrape_opts {
    const int *pids; /* its targets */
    size_t npids;
    int mode;        /* PYU_MODE_* */
    double rate;     /* samples a second */
    double seconds;  /* its window, from now */
    /* Called once, from a loop's thread (or from pyu_scrapes_free), when
     * the scrape has ended: its window is over or its targets are all
     * gone.  It must not call back into the scrapes. */
    void (*done)(void *arg);
    void *arg;
} pyu_scrape_opts;

/* Starts a scrape.  Returns 0, or -PYU_E_NOMEM, -PYU_E_INVAL, or
 * -PYU_E_STATE once the loops are stopped. */
int pyu_scrape_start(pyu_scrapes *ss, const pyu_scrape_opts *o,
                     pyu_scrape **out);

/* After done: its profile (every target's samples in its window; NULL
 * when not ended) and, when no sample was taken because no target could
 * be read, why (one line), else "". */
pyu_profile *pyu_scrape_profile(pyu_scrape *sc);
const char *pyu_scrape_error(const pyu_scrape *sc);

/* Frees the scrape; one still under way (its client went away) is taken
 * off its loops first, and its done is not called. */
void pyu_scrape_free(pyu_scrapes *ss, pyu_scrape *sc);

#ifdef __cplusplus
}
#endif
#endif
