"""Target with a thread parked inside a garbage collection: gc.collect()
finds a reference cycle whose finalizer blocks.  Prints the collecting
thread's ident, then "ready"."""

import gc
import threading
import time

inside = threading.Event()


class Blocker:
    def __del__(self):
        inside.set()
        time.sleep(1e6)  # the collection never ends


def collect():
    a, b = Blocker(), Blocker()
    a.other, b.other = b, a
    del a, b
    gc.collect()


def main():
    gc.disable()  # only the explicit collection runs
    t = threading.Thread(target=collect, daemon=True)
    t.start()
    inside.wait()
    print(t.ident, flush=True)
    print("ready", flush=True)
    time.sleep(1e6)


if __name__ == "__main__":
    main()
