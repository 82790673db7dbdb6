/* `pyunwind serve`: Go's net/http/pprof endpoints for CPython processes
 * read from outside (docs/serve.md).  CLI only. */
#ifndef PYUNWIND_FRONTEND_SERVE_H
#define PYUNWIND_FRONTEND_SERVE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Runs `pyunwind serve ARGS` (argv[0] is "serve") until SIGINT or
 * SIGTERM.  Returns a PYU_EXIT_* code; errors are a line on stderr. */
int pyu_cmd_serve(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
