"""Churny workloads for the sampler's accuracy: code whose stacks never
stand still, as real programs' do.  Used by bench/accuracy-run and the
accuracy tests (tests/integration/test_accuracy.py).

    python3 workloads.py MODE

MODE is one of:
    calls       short hot calls: each line of text split, each token
                classified and scored by small functions (0.1-2 us each)
    generators  a pipeline of generators (produce, parse, filter) summed,
                each stage a microsecond or two an item
    recursion   recursive tree building and walking, and naive fib
    sorting     sorting objects with key functions, comparison methods
                and cmp_to_key
    threads     six threads, each running one of the above (the main
                thread waits for them)
    spread      the same six threads, each on a CPU of its own choosing
                in turn (the first on CPU 0, the second on CPU 1, ...):
                with a GIL they take turns across the CPUs, free-threaded
                they run at once, some on the sampler's CPU and some not
    stdlib      the standard library in a loop: json dumps/loads,
                re.match over a list, difflib.unified_diff,
                statistics.pstdev of a generator; it keeps the time each
                phase took by its own clock, and prints the four totals
                (json, re, difflib, statistics; ns) on SIGUSR1
    shortgen    short-lived generators: a generator of four items
                summed through a generator expression, one of three
                iterated, each item a call, and a short loop in a
                function between them (every stack lasts well under a
                microsecond, most of them in generators' frames)
    alternate   main -> a1 -> a2 -> leaf and main -> b1 -> b2 -> leaf in
                a hot loop: a stack "b1 -> a2" or "a1 -> b2" never exists
                (the impossible-stack test)
    periodic    a loop in step with a schedule of 250 ticks a second: 1 ms
                in one_ms(), then 3 ms in three_ms(), by deadlines of
                CLOCK_MONOTONIC (the sampler's schedule's clock)

Prints "ready" once running, then runs until killed.
"""
import os
import signal
import sys
import threading
import time

# ------------------------------------------------------------------ calls

WORDS = ("alpha", "beta", "gamma", "12", "delta", "345", "epsilon", "6")
LINES = [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12))
         for i in range(64)]


def classify(tok):
    return "num" if tok.isdigit() else "word"


def weight(kind):
    return 3 if kind == "num" else 1


def score(tok, kind):
    n = 0
    for ch in tok:
        n = (n * 31 + ord(ch)) & 0xFFFF
    return n * weight(kind)


def process(line):
    total = 0
    for tok in line.split():
        total += score(tok, classify(tok))
    return total


def calls():
    while True:
        for line in LINES:
            process(line)


# ------------------------------------------------------------- generators

def checksum(text):
    n = 0
    for ch in text:
        n = (n * 33 + ord(ch)) & 0xFFFFFF
    return n


def produce(n):
    for i in range(n):
        yield "%d,%s,%s" % (i, WORDS[i % len(WORDS)], WORDS[(i * 3) % 8])


def parse(rows):
    for row in rows:
        a, b, c = row.split(",")
        yield int(a), b + c, checksum(row)


def keep(rows):
    for a, b, h in rows:
        if (a + h) % 3:
            yield a, checksum(b.upper())


def generators():
    while True:
        sum(a + h for a, h in keep(parse(produce(2000))))


# -------------------------------------------------------------- recursion

def build(depth):
    if depth == 0:
        return None
    return (build(depth - 1), build(depth - 1))


def count(tree):
    if tree is None:
        return 1
    return 1 + count(tree[0]) + count(tree[1])


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def recursion():
    while True:
        count(build(10))
        fib(16)


# ---------------------------------------------------------------- sorting

class Item:
    def __init__(self, i):
        self.i = i
        self.name = WORDS[i % len(WORDS)]

    def key(self):
        return (self.name, -self.i)

    def __lt__(self, other):
        return self.i % 97 < other.i % 97


def compare(a, b):
    return (a.i % 13) - (b.i % 13)


def sorting():
    import functools
    items = [Item((i * 7919) % 1000) for i in range(300)]
    while True:
        sorted(items, key=Item.key)
        sorted(items)
        sorted(items, key=functools.cmp_to_key(compare))
        sorted(items, key=lambda it: it.name)


# ---------------------------------------------------------------- threads

def threads(spread=False):
    work = [calls, generators, recursion, sorting, calls, generators]
    cpus = sorted(os.sched_getaffinity(0) | set(range(os.cpu_count() or 1)))

    def pinned(k, w):
        def run():
            if spread:  # (the thread alone: pid 0 is the calling thread)
                os.sched_setaffinity(0, {cpus[k % len(cpus)]})
            w()
        return run
    ts = [threading.Thread(target=pinned(k, w), daemon=True,
                           name="worker-%d" % k)
          for k, w in enumerate(work)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


# ----------------------------------------------------------------- stdlib

SPENT = [0, 0, 0, 0]  # ns in each phase of stdlib(), by its own clock

def stdlib():
    import difflib
    import json
    import re
    import statistics
    doc = {"users": [{"id": i, "name": "user%d" % i,
                      "tags": ["a", "b", "c"][: i % 4], "score": i * 1.5}
                     for i in range(60)]}
    words = ["alpha%d" % i if i % 3 else "beta-%d" % i for i in range(200)]
    pat = re.compile(r"^(alpha|beta)-?(\d+)$")
    a = ["line %d of the text\n" % i for i in range(120)]
    b = [s if i % 7 else s.upper() for i, s in enumerate(a)]

    def values():
        for i in range(300):
            yield i * 0.5

    def count_matches():
        return sum(1 for w in words if pat.match(w))

    def count_diff():
        return sum(1 for _ in difflib.unified_diff(a, b))

    clock = time.perf_counter_ns
    spent = SPENT
    while True:
        t0 = clock()
        for _ in range(5):
            json.loads(json.dumps(doc))
        t1 = clock()
        count_matches()
        t2 = clock()
        count_diff()
        t3 = clock()
        statistics.pstdev(values())
        t4 = clock()
        spent[0] += t1 - t0
        spent[1] += t2 - t1
        spent[2] += t3 - t2
        spent[3] += t4 - t3


# --------------------------------------------------------------- shortgen

def double(i):
    return i * 2


def inner(n):
    for i in range(n):
        yield double(i)


def middle(n):
    for x in inner(n):
        yield x + 1


def spin(k):
    t = 0
    for i in range(k):
        t += i
    return t


def shortgen():
    while True:
        sum(1 for _ in middle(4))
        for _ in inner(3):
            pass
        spin(30)


# -------------------------------------------------------------- alternate

def leaf():
    return 1


def a2():
    return leaf()


def a1():
    return a2()


def b2():
    return leaf()


def b1():
    return b2()


def alternate():
    while True:
        a1()
        b1()


# -------------------------------------------------------------- recurring

# alternate's loop with each function called again by itself once:
# main -> recurring -> c1 -> c1 -> c2 -> c2 -> leaf, then the same of d.
# Before 3.11 a code object keeps one frame object for its next call; the
# second of two calls at once takes one from the free list, which the
# other half of the loop took a moment before, so one frame object's
# address holds c1's calls and d1's in turn (the same slots of the data
# stack from 3.11).  A stack that is not a start of one of the two chains
# is one the target never had (tests/helpers/accuracy.py).

def c2(k):
    return c2(k - 1) if k else leaf()


def c1(k):
    return c1(k - 1) if k else c2(1)


def d2(k):
    return d2(k - 1) if k else leaf()


def d1(k):
    return d1(k - 1) if k else d2(1)


def recurring():
    while True:
        c1(1)
        d1(1)


# --------------------------------------------------------------- periodic

def periodic():
    clock = time.monotonic_ns
    due = clock()
    while True:
        due += 4_000_000
        one_ms(clock, due - 3_000_000)
        three_ms(clock, due)


def one_ms(clock, until):
    while clock() < until:
        pass


def three_ms(clock, until):
    while clock() < until:
        pass


MODES = {"calls": calls, "generators": generators, "recursion": recursion,
         "sorting": sorting, "threads": threads, "stdlib": stdlib,
         "shortgen": shortgen, "alternate": alternate,
         "recurring": recurring, "periodic": periodic,
         "spread": lambda: threads(spread=True)}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        sys.exit("usage: workloads.py " + "|".join(MODES))
    sys.setrecursionlimit(5000)
    signal.signal(signal.SIGUSR1, lambda *_: print(*SPENT, flush=True))
    print("ready", flush=True)
    MODES[sys.argv[1]]()


if __name__ == "__main__":
    main()
