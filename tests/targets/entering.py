"""A thread that enters the eval loop from C code again and again:
sorted() calls key, a Python function, for every item, and each call is a
new run of the eval loop (3.11, 3.12: a _PyCFrame on the C stack that the
thread state names a moment before the loop fills it in).

Usage: entering.py TRUTH_PATH.  Writes to TRUTH_PATH, as JSON, the
address of its thread state (PyThreadState_Get) and the stack as key sees
it, outermost first, without key's own frame: the stack of the moment the
loop that runs key is entered.  Then prints "ready" and sorts forever."""

import ctypes
import json
import sys
import traceback

first = [True]


def key(x):
    if first[0]:  # (from sort_loop's first call of sorted)
        first[0] = False
        get = ctypes.pythonapi.PyThreadState_Get
        get.restype = ctypes.c_void_p
        stack = traceback.extract_stack()[:-1]  # (not key's own frame)
        with open(sys.argv[1], "w") as f:
            json.dump({"tstate": get(),
                       "frames": [[s.name, s.lineno] for s in stack]}, f)
        print("ready", flush=True)
    return -x


def sort_loop(items):
    while True:
        sorted(items, key=key)


if __name__ == "__main__":
    sort_loop(list(range(64)))
