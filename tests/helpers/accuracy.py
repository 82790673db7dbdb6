"""How far apart two sampled profiles are: the distances bench/accuracy-run
prints and tests/integration/test_accuracy.py bounds.

Profiles are collapsed files (pyunwind's `--format collapsed`, CPython's
`profiling.sampling --collapsed`): `tid:N;FILE:FUNC:LINE;... COUNT`.  A
function is FILE:FUNC (the line dropped); synthetic frames (<unknown>,
<GC>, <native>) are themselves.

    python3 accuracy.py REFERENCE OTHER...    prints the distances
    python3 accuracy.py --phases F,G,... REFERENCE OTHER...
                                              and the distance within the
                                              phases rooted at F, G, ...
    python3 accuracy.py --impossible PROFILE  a profile of workloads.py
                                              alternate: its samples, the
                                              impossible ones, those with
                                              <unknown>

- self distribution: the share of samples in which each function was the
  innermost frame;
- total distribution: each function's samples anywhere on the stack
  (counted once per sample), normalised to sum to 1;
- distance: the total-variation distance between two distributions,
  half the sum of the absolute differences (0: identical, 1: disjoint);
- within the phases (a program whose time goes to a few phases, each
  under one function, as workloads.py stdlib's): each phase's self
  distribution against the reference's, weighted by the reference's share
  of that phase.  The share of a phase swings from one run to the next on
  one process by more than the distance a change to the sampler makes;
  this distance leaves that swing out (a sample in no phase is left out).
"""
import collections
import os
import sys


def function_of(frame):
    parts = frame.rsplit(":", 1)
    if len(parts) == 2 and parts[1].isdigit():
        return parts[0]
    return frame


def read(path):
    """(self counts, total counts, samples) of a collapsed file."""
    own = collections.Counter()
    total = collections.Counter()
    n = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            stack, _, count = line.rpartition(" ")
            try:
                c = int(count)
            except ValueError:
                continue
            frames = [x for x in stack.split(";") if x]
            if frames and frames[0].startswith(("tid:", "pid:")):
                frames = frames[1:]
            while frames and frames[0].startswith("tid:"):
                frames = frames[1:]
            if not frames:
                continue
            funcs = [function_of(x) for x in frames]
            own[funcs[-1]] += c
            for fn in set(funcs):
                total[fn] += c
            n += c
    return own, total, n


def normalised(counter):
    s = sum(counter.values())
    return {k: v / s for k, v in counter.items()} if s else {}


def tvd(a, b):
    keys = set(a) | set(b)
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys)


def distances(ref_path, path):
    """(self distance, total distance, samples of path)."""
    rs, rt, _ = read(ref_path)
    s, t, n = read(path)
    return (tvd(normalised(rs), normalised(s)),
            tvd(normalised(rt), normalised(t)), n)


def shares(path):
    """{function: (self share, total share)} over the samples of path."""
    own, total, n = read(path)
    return {k: (own.get(k, 0) / n, total.get(k, 0) / n)
            for k in set(own) | set(total)} if n else {}


def by_phase(path, roots):
    """{root: Counter of self functions} of the samples of path whose
    stack holds a function named root (its qualified name's last part;
    the outermost such), over roots."""
    per = {r: collections.Counter() for r in roots}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            funcs = [function_of(x) for x in stack.split(";")
                     if x and not x.startswith(("tid:", "pid:"))]
            for fn in funcs:
                name = fn.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
                if name in per:
                    per[name][funcs[-1]] += int(count)
                    break
    return per


def within_phases(ref_path, path, roots):
    """The self distance within the phases rooted at roots (see above)."""
    ref, other = by_phase(ref_path, roots), by_phase(path, roots)
    total = sum(sum(c.values()) for c in ref.values())
    d = 0.0
    for r in roots:
        n = sum(ref[r].values())
        if n and other[r]:
            d += tvd(normalised(ref[r]), normalised(other[r])) * n / total
    return d


def pairs(stack, file=None):
    """The (caller, callee) pairs of a collapsed stack, by function name
    (the last part of a qualified name); with file, of the frames of that
    file (a program's own calls: not the <module> of the interpreter's
    start-up, a .pth line's exec, inside the <module> of site)."""
    funcs = [f.split(":")[-2].rsplit(".", 1)[-1] for f in stack.split(";")
             if f.count(":") >= 2 and
             (file is None or f.split(":")[0] == file)]
    return set(zip(funcs, funcs[1:]))


# workloads.py alternate's calls: any other pair of these functions, one
# right above the other, is a stack the target never had (b1 -> a2, a
# frame left behind by the other half of the loop; b1 -> leaf, a frame
# lost between)
ALTERNATE_CALLS = {("<module>", "main"), ("main", "alternate"),
                   ("alternate", "a1"), ("alternate", "b1"), ("a1", "a2"),
                   ("b1", "b2"), ("a2", "leaf"), ("b2", "leaf")}
ALTERNATE_FUNCS = {f for call in ALTERNATE_CALLS for f in call}


# workloads.py recurring's two stacks at their deepest: a stack it has is
# a start of one of them (c1 -> c1 -> c1, c1 -> c2 -> leaf, d1 -> c2, or
# c2 alone, are stacks it never had); recurring() calls c1 from its first
# line of the loop and d1 from the second
RECURRING_CHAINS = (("<module>", "main", "recurring", "c1", "c1", "c2",
                     "c2", "leaf"),
                    ("<module>", "main", "recurring", "d1", "d1", "d2",
                     "d2", "leaf"))


def recurring_ok(stack, lines=True):
    """Whether a collapsed stack of workloads.py recurring is one the
    target can have (what was read of it, when <unknown> is on top); with
    lines, recurring() at the line of the call above it too."""
    frames = [f.split(":")[-2:] for f in stack.split(";")
              if f.count(":") >= 2]
    funcs = tuple(name for name, _ in frames)
    if not any(chain[:len(funcs)] == funcs for chain in RECURRING_CHAINS):
        return False
    if lines and len(funcs) > 3:  # (recurring's line: the chain's head's)
        return int(frames[2][1]) == RECURRING_LINES[funcs[3]]
    return True


def recurring_lines():
    """The lines of workloads.py where recurring() calls c1 and d1."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "..", "targets", "workloads.py")
    with open(path) as f:
        return {text.strip()[:2]: n for n, text in enumerate(f, 1)
                if text.strip() in ("c1(1)", "d1(1)")}


RECURRING_LINES = recurring_lines()


def impossible(text, lines=False):
    """(samples, impossible ones, ones with <unknown>) of a collapsed
    profile of workloads.py alternate or recurring; with lines, a caller
    at another line than its call of the frame above is one too
    (recurring only)."""
    total = bad = unknown = 0
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        total += int(n)
        if ":recurring:" in stack:
            wrong = not recurring_ok(stack, lines)
        else:
            wrong = any({caller, callee} <= ALTERNATE_FUNCS and
                        (caller, callee) not in ALTERNATE_CALLS
                        for caller, callee in pairs(stack,
                                                    "workloads.py"))
        bad += int(n) if wrong else 0
        unknown += int(n) if "<unknown>" in stack.split(";") else 0
    return total, bad, unknown


def main(argv):
    if len(argv) == 3 and argv[1] in ("--impossible", "--impossible-lines"):
        with open(argv[2]) as f:
            print("%d %d %d" % impossible(f.read(), argv[1].endswith("lines")))
        return
    roots = None
    if len(argv) > 2 and argv[1] == "--phases":
        roots, argv = argv[2].split(","), argv[:1] + argv[3:]
    if len(argv) < 3:
        sys.exit("usage: accuracy.py [--phases F,G,...] REFERENCE OTHER...")
    for p in argv[2:]:
        ds, dt, n = distances(argv[1], p)
        extra = (" phases %.4f" % within_phases(argv[1], p, roots)
                 if roots else "")
        print("%s: self %.4f total %.4f (%d samples)%s" % (p, ds, dt, n,
                                                          extra))


if __name__ == "__main__":
    main(sys.argv)
