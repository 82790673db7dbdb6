/* A sampling window for the debugger plugins (see window.h): the sampler
 * runs in a thread of its own while the debugger runs the inferior. */
#include "window.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pyu_cmd_window {
    pthread_t thread;
    pyu_session *s;   /* owned: reads the process directly */
    int pid;          /* ... this one */
    pyu_cmd_opts o;
    pyu_profile *p;   /* borrowed */
    FILE *raw;        /* --format raw -o FILE: the capture, streamed */
    bool streamed;    /* ... and so written already */
    void (*interrupt)(void *arg);
    void *arg;
    volatile sig_atomic_t stop;
    bool timed_out;
    int ex;
    char msg[1024];
    char *diag;
    size_t dlen;
    FILE *diagf;
};

static void *window_main(void *arg)
{
    pyu_cmd_window *w = arg;
    sigset_t all;
    sigfillset(&all); /* the debugger's signal handlers stay in its thread */
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pyu_cmd_sample_hooks h = {.stop = &w->stop, .raw = w->raw,
                              .pid = w->pid};
    w->ex = pyu_cmd_sample_run(w->s, &w->o, &h, w->p, w->diagf, w->msg,
                               sizeof w->msg);
    if (!w->stop) { /* the duration ended, or the target did */
        w->timed_out = true;
        w->interrupt(w->arg);
    }
    return NULL;
}

int pyu_cmd_window_start(int pid, const pyu_cmd_opts *o, pyu_profile *p,
                         void (*interrupt)(void *arg), void *arg,
                         pyu_cmd_window **out, char *msg, size_t msglen)
{
    *out = NULL;
    pyu_cmd_window *w = calloc(1, sizeof *w);
    if (!w || !(w->s = pyu_session_new())) {
        free(w);
        snprintf(msg, msglen, "out of memory");
        return PYU_EXIT_INTERNAL;
    }
    w->pid = pid;
    int ex = pyu_cmd_output_ready(o, msg, msglen);
    if (ex != PYU_EXIT_OK) {
        pyu_session_free(w->s);
        free(w);
        return ex;
    }
    int rc = pyu_open_pid(w->s, pid, PYU_OPEN_NONBLOCKING);
    if (rc < 0) {
        snprintf(msg, msglen, "%s", pyu_errmsg(w->s));
        pyu_session_free(w->s);
        free(w);
        return pyu_cmd_exit_for(rc);
    }
    w->o = *o;
    w->o.output = NULL;
    /* a capture goes to its file as it samples, as the CLI's: a window
     * cut short (the debugger killed) keeps what it had */
    w->streamed = pyu_cmd_format_is(o, "raw") && o->output;
    if (w->streamed && !(w->raw = fopen(o->output, "wb"))) {
        snprintf(msg, msglen, "cannot write %s: %s", o->output,
                 strerror(errno));
        pyu_session_free(w->s);
        free(w);
        return PYU_EXIT_INTERNAL;
    }
    w->p = p;
    w->interrupt = interrupt;
    w->arg = arg;
    w->diagf = open_memstream(&w->diag, &w->dlen);
    if (!w->diagf || pthread_create(&w->thread, NULL, window_main, w) != 0) {
        if (w->diagf)
            fclose(w->diagf);
        if (w->raw)
            fclose(w->raw);
        free(w->diag);
        pyu_session_free(w->s);
        free(w);
        snprintf(msg, msglen, "cannot start the sampler's thread");
        return PYU_EXIT_INTERNAL;
    }
    *out = w;
    return PYU_EXIT_OK;
}

int pyu_cmd_window_end(pyu_cmd_window *w, bool *timed_out, char *msg,
                       size_t msglen)
{
    w->stop = 1;
    pthread_join(w->thread, NULL);
    fflush(w->diagf);
    *timed_out = w->timed_out;
    snprintf(msg, msglen, "%s", w->msg);
    if (w->raw) {
        bool bad = fclose(w->raw) != 0;
        w->raw = NULL;
        if (bad && w->ex == PYU_EXIT_OK) {
            snprintf(msg, msglen, "writing the capture failed: %s",
                     strerror(errno));
            return PYU_EXIT_INTERNAL;
        }
    }
    return w->ex;
}

const char *pyu_cmd_window_diag(const pyu_cmd_window *w)
{
    return w->diag ? w->diag : "";
}

void pyu_cmd_window_free(pyu_cmd_window *w)
{
    if (!w)
        return;
    fclose(w->diagf);
    if (w->raw)
        fclose(w->raw);
    free(w->diag);
    pyu_session_free(w->s);
    free(w);
}

bool pyu_cmd_window_streamed(const pyu_cmd_window *w)
{
    return pyu_cmd_format_is(&w->o, "raw") && w->streamed;
}
