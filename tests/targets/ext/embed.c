/* A program that embeds CPython through libpython (the runtime then lives
 * in libpython3.X.so, mapped at a load bias): runs the script argv[1]
 * with sys.argv = argv[1:].
 *
 *     embed SCRIPT [ARGS...]
 */
#include <Python.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: embed SCRIPT [ARGS...]\n");
        return 2;
    }
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.parse_argv = 0; /* sys.argv as given, not python's options */
    PyStatus st = PyConfig_SetBytesArgv(&config, argc - 1, argv + 1);
    if (!PyStatus_Exception(st))
        st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st))
        Py_ExitStatusException(st);
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    int rc = PyRun_SimpleFileEx(f, argv[1], 1);
    return Py_FinalizeEx() < 0 || rc != 0 ? 1 : 0;
}
