"""Target whose stacks never stand still: threads recurse to random depths,
create and drop code objects (exec of fresh source), and start and end
threads, so a reader that does not stop the process sees memory change
under it.  Prints "ready", then runs until killed."""

import random
import sys
import threading


def dive(n, rng):
    if n <= 0:
        return sum(range(rng.randrange(50)))
    return dive(n - 1, rng) + 1


def churn(seed):
    rng = random.Random(seed)
    while True:
        dive(rng.randrange(1, 300), rng)
        if rng.random() < 0.05:  # new code objects, soon freed
            ns = {}
            exec("def f%d(x):\n    return x * %d\n" % (rng.randrange(1000),
                                                        rng.randrange(1000)), ns)


def short_lived():
    while True:
        t = threading.Thread(target=dive, args=(20, random.Random()))
        t.start()
        t.join()


def main():
    sys.setrecursionlimit(2000)
    for i in range(4):
        threading.Thread(target=churn, args=(i,), daemon=True).start()
    threading.Thread(target=short_lived, daemon=True).start()
    print("ready", flush=True)
    churn(99)


if __name__ == "__main__":
    main()
