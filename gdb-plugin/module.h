/* What the files of the gdb plugin's extension module share. */
#ifndef PYUNWIND_GDB_MODULE_H
#define PYUNWIND_GDB_MODULE_H

#include <Python.h>

#include "command.h"

/* Raises _pyunwind.Error with the message and .code; returns NULL. */
PyObject *raise_error(int code, const char *msg);

typedef struct {
    int argc;
    char **argv; /* argv[0] = the command; strings owned here */
} argvec;

void argvec_free(argvec *a);
/* Parses (command, argv list) into *a and *o; raises Error on bad options.
 * On success the caller frees *a (o's strings point into it). */
int parse_command(const char *command, PyObject *list, argvec *a,
                  pyu_cmd_opts *o);
/* The session of an opened _pyunwind.Session, or NULL (Error raised). */
pyu_session *session_of(PyObject *o);

extern PyTypeObject SessionType;
extern PyTypeObject ProfileType; /* profile.c */

#endif
