"""A target whose Python stack goes through C twice: <module> -> level1
-> crashext.call (C) -> level2 -> crashext.call (C) -> level3 ->
crashext.block() or crashext.crash() (C).

    native.py OUT EXT_DIR block|crash [--threads]

Writes OUT (JSON: its Python frames innermost first, as the traceback
module sees them, and its thread ids) and prints "ready" just before the
C call at the bottom.  With --threads a second thread blocks the same
way first (its frames under OUT.thread)."""
import json
import os
import sys
import threading
import traceback

sys.path.insert(0, sys.argv[2])
import crashext  # noqa: E402

OUT, HOW = sys.argv[1], sys.argv[3]


def record(path):
    frames = [{"function": f.name, "line": f.lineno}
              for f in reversed(traceback.extract_stack()[:-1])]
    with open(path + ".tmp", "w") as fh:
        json.dump({"frames": frames, "native_id": threading.get_native_id(),
                   "ident": threading.get_ident()}, fh)
    os.replace(path + ".tmp", path)


def level3(path, how, ready):
    record(path)
    if ready:
        print("ready", flush=True)
    if how == "crash":
        crashext.crash()
    else:
        crashext.block()


def level2(path, how, ready):
    crashext.call(lambda: level3(path, how, ready))


def level1(path, how, ready):
    crashext.call(lambda: level2(path, how, ready))


if "--threads" in sys.argv[4:]:
    t = threading.Thread(target=level1, args=(OUT + ".thread", "block",
                                              False), daemon=True)
    t.start()
    while not os.path.exists(OUT + ".thread"):
        threading.Event().wait(0.01)
level1(OUT, HOW, True)
