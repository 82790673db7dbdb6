"""A target whose main thread blocks inside expressions that tracebacks
mark with carets: a subscript, a binary operation, a call over several
lines, down to threading's own Event.wait.

    carets.py OUT

A second thread waits until the main thread is blocked, then writes OUT
(JSON: the main thread's native id and its frames innermost first, each
with its positions as co_positions gives them for the instruction the
frame is at, and the lines this interpreter's own traceback module
writes under the frame's "File" line for those positions), prints
"ready" and ends."""
import itertools
import json
import os
import sys
import threading
import traceback

OUT = sys.argv[1]
blocked = threading.Event()


def leaf(table, key):
    return table[key] + (blocked.wait() and 0)


def middle(values, table):
    scale = 2
    return values[0] * scale + leaf(table,
                                    "key") * len(
        values)


def top():
    values = [1, 2, 3]
    total = middle(values, {"key": 1})[0]
    return total


def positions(f):
    return next(itertools.islice(f.f_code.co_positions(), f.f_lasti // 2,
                                 None))


def record(main):
    frames = sys._current_frames()[main.ident]
    out = []
    f = frames
    while f is not None:
        line, end_line, col, end_col = positions(f)
        summary = traceback.FrameSummary(
            f.f_code.co_filename, line, f.f_code.co_name, end_lineno=end_line,
            colno=col, end_colno=end_col)
        text = traceback.StackSummary.from_list([summary]).format()[0]
        out.append({"function": f.f_code.co_name, "line": line,
                    "end_line": end_line, "col": col, "end_col": end_col,
                    "text": text.split("\n", 1)[1]})
        f = f.f_back
    with open(OUT + ".tmp", "w") as fh:
        json.dump({"native_id": main.native_id, "frames": out}, fh)
    os.replace(OUT + ".tmp", OUT)


def asleep(native_id):
    with open("/proc/self/task/%d/stat" % native_id) as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "S"


def recorder(main):
    # until the main thread waits inside Event.wait, in its lock's acquire:
    # asleep, and at the same instruction before and after a wait of this
    # thread's, in which it could have run on (were it only waiting for
    # the GIL).  (A fixed wait was too short on a loaded machine.)
    def where():
        f = sys._current_frames().get(main.ident)
        top, names = f, []
        while f is not None:
            names.append(f.f_code.co_name)
            f = f.f_back
        return names, (top.f_code, top.f_lasti) if top is not None else None
    while True:
        names, at = where()
        if names[:2] == ["wait", "wait"] and "leaf" in names and \
                asleep(main.native_id):
            threading.Event().wait(0.05)
            if where()[1] == at and asleep(main.native_id):
                break
        threading.Event().wait(0.01)
    record(main)
    print("ready", flush=True)


threading.Thread(target=recorder, args=(threading.main_thread(),)).start()
top()
