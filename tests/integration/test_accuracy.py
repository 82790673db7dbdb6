"""The sampler's profiles of running targets against the truth.

The exact reference for a profile of a running target is the same sampler
with --blocking on the same process: every thread stopped for each sample,
so each stack is the one the thread had at that instant.  A profile taken
without stopping the target (the sampler's normal mode) must show the same
shares within sampling noise: a stack it cannot read whole still counts,
and a function that runs for well under the microsecond a read takes still
gets its share.  And a running target's stacks must never be ones the
target cannot have: tests/targets/workloads.py `alternate` calls
main -> a1 -> a2 -> leaf and main -> b1 -> b2 -> leaf in a hot loop, where
b1 -> a2 never exists.

bench/accuracy-run measures every workload on every interpreter (minutes
each); these tests keep the cases that failed before the acceptance rules
(docs/sample.md "Consistency") to the bounds below."""

import os
import re
import signal
import subprocess
import sys

import pytest

import conftest
from conftest import (ROOT, TARGETS, TIMEOUT, interpreters, matrix, pyunwind,
                      until_shown)

sys.path.insert(0, os.path.join(ROOT, "tests", "helpers"))
import accuracy  # noqa: E402  (tests/helpers/accuracy.py)

PYTHONS = [p for p in interpreters() if not p[0].endswith("-dbg")]
IDS = [p[0] for p in PYTHONS]
# one interpreter of each build for the shares (a shared-library build or a
# distribution's build of the same version reads the same way)
KINDS = [p for p in PYTHONS if p[0] in (
    "3.9.2-bullseye", "3.10.13-pyenv-stripped", "3.11.2-debian",
    matrix("3.13"), matrix("3.13t"), matrix("3.14"), matrix("3.14t"),
    "3.15.2-debian")]


# the versions whose frames are frame objects, reused from free lists
OBJECT_FRAMES = [p for p in PYTHONS if p[0].startswith(("3.9.", "3.10."))]


def chosen(*labels):
    return [p for p in PYTHONS if p[0] in labels]


# Each workload on every interpreter is bench/accuracy-run's (10,000
# samples a method, bench/README.md); the tests hold each workload on the
# interpreters where it once went past its bound, one of each way of
# reading among them (3.11's current frame in the eval loop's cframe,
# 3.13 and 3.14 without anchors, free-threaded, 3.15 with anchors):
# short calls on 3.11, 3.13t and 3.15, and on 3.9 and 3.10, whose frame
# objects are read their own way (objects.c);
CALLS = chosen("3.9.2-bullseye", "3.10.13-pyenv-stripped", "3.11.2-debian",
               matrix("3.13t"), "3.15.2-debian")
# sorting (functions C code calls) on 3.13 and 3.14 (Debian's 3.14.10
# was 0.07-0.12 from one process to the next, and failed CI twice in a
# row at 0.127, until the thread state's line with the current frame was
# read first and a popped frame whose slot C code was filling again was
# put on the frame below: 0.01-0.06, 91421a4); the generator
# pipeline on 3.11 and 3.15, whose profiles swung (below), and on 3.13t
# and 3.14t, where each generator is resumed through C code and found by
# what holds it: a bound on the reads that search made took 3.13t from
# 0.02 to 0.10 unseen (2026-11-27)
CASES = [(label, python, "sorting")
         for label, python in chosen(matrix("3.13"), matrix("3.14"))] + \
    [(label, python, "generators")
     for label, python in chosen("3.10.13-pyenv-stripped", "3.11.2-debian",
                                 matrix("3.13t"), matrix("3.14t"),
                                 "3.15.2-debian")]
# the standard library's phases on 3.11, and on 3.14t, which swung from
# one process to the next
STDLIB = chosen("3.11.2-debian", matrix("3.14t"))

RATE = "250"  # (stopping the target for each reference sample, about
# 20 us, at 1 kHz measurably changes where it spends its time)
SECONDS = "3"
ROUNDS = 2
# Two profiles of 1,500 samples of these workloads, both taken with
# --blocking, are 0.01-0.03 apart (total-variation distance of the
# functions' self shares; bench/README.md).  0.08 is three times that: a
# profile past it over- or under-weights some function by four points or
# more.  Before the acceptance rules the running profiles were 0.17-0.45
# from their reference on these workloads.
BOUND = 0.08
# Functions C code calls (sorted's key and comparisons) and generator
# pipelines: 0.01-0.04 from their reference with the GIL (bench/README.md).
# The free-threaded builds, where a generator is resumed through C code
# and its objects are new every few milliseconds, were 0.05-0.09 until the
# frame below a generator's on the data stack was looked at (the thread
# state's moment, 3.13+): 0.005-0.025 since, held to BOUND as short calls
# are.  Before the work on links gone by the copy: 0.07-0.15, and
# 0.31-0.45 before the acceptance rules.  The bounds hold what was
# reached, with room for noise.
OPEN_BOUND = 0.1
# Generator pipelines on 3.15 swung, for seconds at a time, to 0.10-0.27
# from the reference until e17ff5e: the sampler read the interpreter's
# fields (the garbage collector's count among them) just before each
# thread state, and the thread stalled in the code that allocates as its
# state was copied; 0.011 since (bench/README.md), held to OPEN_BOUND.
# 3.11's swung from one process to the next (0.008-0.18: a walk of
# another eval loop remembered as the named loop's, and taken for it
# again and again) until a loop's walk was proven by the current frame of
# the loop below it (9bc6624): 0.013 in the benchmark, 0.009-0.035 in
# eight processes; held to OPEN_BOUND too, where it had 0.25.
# Short-lived generators and a short call (workloads.py shortgen, one pass
# of its loop about a microsecond on 3.14).  Read from another CPU than
# the target's, a thread runs on under the read, and the pipeline's
# generators were over before their copy a third of the time: 0.09-0.13
# from the reference on 3.14 and 3.15 and 0.07-0.45 on 3.11-3.13t at
# 3,000 samples a method, for all the rules could do (issue 22,
# bench/README.md).  The sampler now sits on the CPU of the thread it
# reads (frontend/sample.c), where its wake-up switches the thread out
# for the read: 0.014-0.028 on every interpreter, the reference's own
# noise (0.015-0.036 at 3,000 samples).  SHORTGEN_WHOLE is that noise's
# top with room; --other-cpu, the reads of before, is past it on 3.13-3.15
# and far past it on 3.11.  And each function with 5 % or more of the
# reference keeps its share within SHORTGEN_EACH: four standard
# deviations of the difference of two shares of 3,000 samples at 20 %
# (0.01 each), where the pair `shortgen` and `spin` were 0.05-0.08 off
# together read from another CPU.
SHORTGEN_WHOLE = 0.05
SHORTGEN_EACH = 0.04
SHORTGEN_ROUNDS = 4  # (3,000 samples a method)
SHORTGEN = chosen("3.11.2-debian", matrix("3.13t"), "3.15.2-debian")  # (where
# --other-cpu was furthest off, and 3.15)

# How far each figure swings from one target process to the next:
# bench/accuracy-spread measures ten processes a case exactly as the
# tests below measure one (2026-12-08, 91421a4; the table, with each
# case's mean and standard deviation, is in bench/README.md).  A test
# fails only when its first process and a second one are both past the
# bound; a bound three standard deviations above the mean leaves a
# process past it about once in 700 and a false failure about once in
# 500,000 runs (under 1 in 10,000 while the true deviation is under 1.3
# times what ten processes showed).  Every bound above is 4-11 deviations
# out but three, a chance failure in 1 in 500 to 1 in 45,000 runs,
# widened here to 3.5 deviations: generators on 3.10 (frame objects) read from another CPU,
# 0.053 +- 0.025 (largest 0.096, against 0.1); on 3.13t, 0.036 +- 0.017
# (0.063, against 0.08); shortgen on 3.11, 0.028 +- 0.012 as a whole
# (0.058, against 0.05: one process in ten past it) and 0.019 +- 0.009 a
# function (0.040, against 0.04).  CI failed at 3.14.10's sorting this
# way (two processes at 0.127 against 0.1, when it was 0.07-0.12).
WIDER = {("generators", "3.10.13-pyenv-stripped"): 0.14,
         ("generators", matrix("3.13t")): 0.1}
SHORTGEN_WIDER = {"3.11.2-debian": (0.07, 0.055)}


def case_bound(label, mode):
    """The bound of a callbacks-and-generators case's distance."""
    return WIDER.get((mode, label),
                     BOUND if label.endswith("t") else OPEN_BOUND)


def shortgen_bounds(label):
    """(the bound of shortgen's distance as a whole, of each function's
    share) on an interpreter."""
    return SHORTGEN_WIDER.get(label, (SHORTGEN_WHOLE, SHORTGEN_EACH))


class Workload:
    def __init__(self, python, mode):
        self.proc = subprocess.Popen(
            [python, os.path.join(TARGETS, "workloads.py"), mode],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.close()
            raise AssertionError("workload %s: %r" % (mode, line))
        self.pid = self.proc.pid

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()

    def spent(self):
        """The time (ns) each phase of workloads.py stdlib took so far, by
        the target's own clock."""
        os.kill(self.pid, signal.SIGUSR1)
        return [int(x) for x in self.proc.stdout.readline().split()]


def sample_into(path, pid, *args):
    r = pyunwind("sample", "-r", RATE, "-d", SECONDS, "--format",
                 "collapsed", *args, str(pid), timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    with open(path, "a", encoding="utf-8") as f:
        f.write(r.stdout)


def pin(pid):
    """The target on one CPU (nothing when there is one): the samplers,
    free to use any CPU, go to it or stay off it as they do on a machine
    whose scheduler keeps the target on one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        os.sched_setaffinity(pid, {cpus[0]})


def nearer_of_two(measure, passes):
    """measure(1), or when passes() refuses it the lesser of it and
    measure(2): a target process whose profile is past its bounds is
    followed by a second one (short-lived generators and the phases
    swing from one process to the next); a sampler that is off stays off
    on a second process."""
    first = measure(1)
    return first if passes(first) else min(first, measure(2))


def distance_to_reference(python, mode, workdir, bound, pinned=False):
    """(self distance of the running profile to the blocking one, its
    shares, the reference's shares); rounds interleaved on one process,
    the nearer of two processes when the first is past bound."""
    return nearer_of_two(
        lambda k: one_distance(python, mode, os.path.join(workdir, str(k)),
                               pinned),
        lambda res: res[0] < bound)


def one_distance(python, mode, workdir, pinned=False, rounds=ROUNDS,
                 how=("--other-cpu",)):
    """how: the running sampler's options; --other-cpu (by default) holds
    the acceptance rules of reading a running thread to their bounds."""
    os.makedirs(workdir, exist_ok=True)
    ref, run = (os.path.join(workdir, n) for n in ("ref.txt", "run.txt"))
    w = Workload(python, mode)
    if pinned:
        pin(w.pid)
    try:
        for _ in range(rounds):
            sample_into(ref, w.pid, "--blocking")
            sample_into(run, w.pid, *how)
        # (more rounds until each profile has more than 1,000 samples,
        # which the bounds were set for: a loaded machine misses ticks)
        def more(_):
            if min(accuracy.read(p)[2] for p in (ref, run)) > 1000:
                return True
            sample_into(ref, w.pid, "--blocking")
            sample_into(run, w.pid, *how)
            return False
        until_shown(more)
    finally:
        w.close()
    ds, _, n = accuracy.distances(ref, run)
    assert n > 1000, n  # (every tick served: no sample left out)
    top = lambda p: sorted(((round(s, 3), f.rsplit(":", 1)[-1])
                            for f, (s, _) in accuracy.shares(p).items()),
                           reverse=True)[:12]
    return ds, top(run), top(ref)


@pytest.mark.accuracy
@pytest.mark.parametrize("label,python", CALLS, ids=[p[0] for p in CALLS])
def test_short_calls_keep_their_share(label, python, workdir):
    """Functions of 0.1-2 us called in a hot loop (workloads.py calls):
    the running profile is the blocking one within noise."""
    ds, got, want = distance_to_reference(python, "calls", workdir, BOUND)
    assert ds < BOUND, (ds, got, want)


@pytest.mark.accuracy
@pytest.mark.parametrize("label,python,mode", CASES,
                         ids=["%s-%s" % (c[2], c[0]) for c in CASES])
def test_callbacks_and_generators_keep_their_share(label, python, mode,
                                                   workdir):
    """Key functions and comparisons that C code calls (sorted, cmp_to_key)
    and a pipeline of generators, each stage a microsecond or two."""
    bound = case_bound(label, mode)
    ds, got, want = distance_to_reference(python, mode, workdir, bound)
    assert ds < bound, (ds, got, want)


@pytest.mark.accuracy
@pytest.mark.parametrize("label,python", SHORTGEN,
                         ids=[p[0] for p in SHORTGEN])
def test_short_lived_generators_keep_their_share(label, python, workdir):
    """Generators of three or four items, each item a call, and a short
    loop between them, the target kept on one CPU: the sampler reads it
    from that CPU (the thread switched out for the read), and the
    profile is the blocking one within noise, function by function."""
    def one(k):
        ds, got, want = one_distance(python, "shortgen",
                                     os.path.join(workdir, str(k)), True,
                                     SHORTGEN_ROUNDS, how=())
        run, ref = (dict((f, s) for s, f in p) for p in (got, want))
        worst = max(abs(run.get(f, 0) - s) for f, s in ref.items()
                    if s >= 0.05)
        return ds, worst, got, want

    whole, each = shortgen_bounds(label)
    ds, worst, got, want = nearer_of_two(
        one, lambda res: res[0] < whole and res[1] < each)
    assert ds < whole, (ds, worst, got, want)
    assert worst < each, (ds, worst, got, want)


@pytest.mark.accuracy
@pytest.mark.debugger
def test_py_sample_in_gdb_keeps_short_calls_share(workdir):
    """py-sample in gdb samples the inferior while gdb lets it run: the
    same sampler, in a thread of gdb's, reading the same process from the
    target's CPU; its profile of short-lived generators is the blocking
    one within noise, function by function, as the CLI's (3.15, the
    stripped build)."""
    from debuggers import GDB_SCRIPT, Gdb
    if not os.path.exists(GDB_SCRIPT):
        pytest.fail("the gdb plugin is not built (scripts/setup builds it)")
    python = conftest.py315(PYTHONS)
    ref, run = (os.path.join(workdir, n) for n in ("ref.txt", "run.txt"))
    w = Workload(python, "shortgen")
    pin(w.pid)
    try:
        cmd = "py-sample -d %s -r %s --format collapsed" % (SECONDS, RATE)

        # (rounds until each profile has more than 2,000 samples, which
        # the bounds were set for: a loaded machine misses ticks)
        def round_(k):
            if k >= SHORTGEN_ROUNDS and \
                    min(accuracy.read(p)[2] for p in (ref, run)) > 2000:
                return True
            sample_into(ref, w.pid, "--blocking")
            tr = Gdb().run([cmd, "detach"], ["-p", str(w.pid)])
            lines = [l for l in tr[cmd].splitlines()
                     if l.startswith("tid:")]
            assert lines, tr.text[-2000:]
            with open(run, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
            return False
        until_shown(round_)
    finally:
        w.close()
    ds, _, n = accuracy.distances(ref, run)
    assert n > 2000, n
    got, want = accuracy.shares(run), accuracy.shares(ref)
    worst = max(abs(got.get(f, (0, 0))[0] - s) for f, (s, _) in want.items()
                if s >= 0.05)
    assert ds < SHORTGEN_WHOLE, (ds, got, want)
    assert worst < SHORTGEN_EACH, (worst, got, want)


@pytest.mark.accuracy
@pytest.mark.debugger
def test_a_loop_in_step_with_the_schedule_keeps_its_shares():
    """A program whose loop has the schedule's period (workloads.py
    periodic at 250/s: 1 ms in one_ms, 3 ms in three_ms, every 4 ms of
    the clock the schedule keeps) is read at a random point of each
    tick's interval, so one_ms keeps its quarter of the samples: running,
    with --blocking, and with py-sample --blocking in gdb (its own loop of
    ticks).  A grid of ticks at fixed points read it at the same point of
    its loop every time: one_ms had nearly all the samples or none."""
    from debuggers import GDB_SCRIPT, Gdb
    if not os.path.exists(GDB_SCRIPT):
        pytest.fail("the gdb plugin is not built (scripts/setup builds it)")
    w = Workload(conftest.py315(PYTHONS), "periodic")
    pin(w.pid)
    got = {}

    def counts(text):
        one = three = 0
        for line in text.splitlines():
            stack, _, n = line.rpartition(" ")
            one += int(n) if ":one_ms:" in stack else 0
            three += int(n) if ":three_ms:" in stack else 0
        return one, three

    def taken(how):
        if how != "gdb":
            r = pyunwind("sample", "-r", "250", "-d", "4", "--format",
                         "collapsed", *([how] if how[0] == "-" else []),
                         str(w.pid), timeout=TIMEOUT)
            assert r.returncode == 0, r.stderr
            return r.stdout
        cmd = "py-sample --blocking -d 4 -r 250 --format collapsed"
        tr = Gdb().run([cmd, "detach"], ["-p", str(w.pid)])
        return "\n".join(l for l in tr[cmd].splitlines()
                         if l.startswith("tid:")) + "\n"
    def near_a_quarter(text):
        one, three = counts(text)
        n = one + three
        # (five standard deviations of a quarter's share of n samples,
        # and at least 0.08: a fixed grid gives about 0 or 1)
        bound = max(0.08, 5 * (0.25 * 0.75 / n) ** 0.5)
        return n > 200 and abs(one / n - 0.25) < bound

    try:
        # (each way's runs of 4 s until more than 200 samples: gdb's
        # round trips, which a loaded machine slows, may serve fewer.  A
        # target that a loaded machine holds back starts its turns late
        # and gives one_ms less than its quarter, by its own clock too
        # (--blocking: 0.14 while a benchmark held the target's CPU):
        # such a set of runs is dropped and made again; a grid of ticks
        # gives about 0 or 1 in every set)
        for how in ("running", "--blocking", "gdb"):
            got[how] = ""

            def run(_):
                got[how] += taken(how)
                if sum(counts(got[how])) <= 200:
                    return False
                if near_a_quarter(got[how]):
                    return True
                got["last " + how] = got[how]
                got[how] = ""
                return False
            until_shown(run)
    finally:
        w.close()
    for how in ("running", "--blocking", "gdb"):
        assert near_a_quarter(got[how]), (how, counts(got[how]))


# workloads.py stdlib's phases, each told by a function on its stacks
PHASES = (("dumps", "loads"), ("count_matches",), ("count_diff",),
          ("pstdev",))
# Each phase's share of a running profile of the standard library loop
# against the share of the time the target's own clock gives it, over the
# same seconds: the truth from the target itself, where the other tests
# take it from another profile.  3,000 samples put the total-variation
# distance of four shares at about 0.01 by chance; 0.011-0.016 on 3.15
# (bench/README.md; 0.012-0.029 in six processes on 2026-11-27), and the
# bound is three times that.  What moves a
# sample to another phase: a torn copy read again tens of microseconds
# later, often in the next phase.  3.11 was past this bound for it
# (0.03-0.046 in every build tried, 0.027-0.031 in four runs of 7b21f1b)
# until the stacks that did not pass were put together at the thread
# state's moment (a0c6de6: 0.008-0.019 in four runs).
PHASE_BOUND = 0.03
# The free-threaded builds are not there yet (issue 22): 0.008-0.051 on
# 3.14t; this holds them where they are.
PHASE_OPEN_BOUND = 0.06


def phase_shares(text):
    """(each phase's share of the samples of a collapsed profile of
    workloads.py stdlib, the share in none of them)."""
    counts, total = [0] * len(PHASES), 0
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        funcs = {f.split(":")[-2].rsplit(".", 1)[-1]
                 for f in stack.split(";") if f.count(":") >= 2}
        total += int(n)
        for k, names in enumerate(PHASES):
            if funcs & set(names):
                counts[k] += int(n)
                break
    return [c / total for c in counts], 1 - sum(counts) / total


@pytest.mark.accuracy
@pytest.mark.parametrize("label,python", STDLIB, ids=[p[0] for p in STDLIB])
def test_phases_keep_their_share_by_the_targets_clock(label, python):
    """The standard library in a loop, sampled running: each phase's
    share of the samples is the share of the time the target's own clock
    gives it over the same seconds (truth from the target itself, not
    from another profile)."""
    bound = PHASE_OPEN_BOUND if label.endswith("t") else PHASE_BOUND
    # (3.14t gave 0.008-0.051 from one process to the next on 2026-11-27)
    d, none, own, got, wrong = nearer_of_two(
        lambda _: phase_distance(python),
        lambda res: res[0] < bound and res[1] < 0.05 and not res[4])
    # (the loop's own lines and the collector: 1.5-3.6 % of the samples)
    assert none < 0.05, (none, got)
    assert d < bound, (d, own, got)
    # a generator goes on from the frame that resumed it, never from one
    # further down that also holds it: pstdev passes `values` to _ss,
    # whose loop resumes it (pstdev -> values was 15-43 of 3,000 samples
    # on every version until the resumer had to lie right under the
    # generator's frames on the data stack)
    assert not wrong, wrong


def phase_distance(python):
    """(distance of the phases' shares of 3,000 running samples to their
    shares of the target's time, the share in no phase, those shares).
    (Runs of 6 s at 500/s until they have 3,000 samples, which the bounds
    were set for: a loaded machine misses ticks; the target's time over
    the same runs.)"""
    w = Workload(python, "stdlib")
    pin(w.pid)
    spent, text = [0] * len(PHASES), ""
    try:
        def run(_):
            nonlocal text
            before = w.spent()
            r = pyunwind("sample", "-r", "500", "-d", "6", "--format",
                         "collapsed", str(w.pid), timeout=TIMEOUT)
            after = w.spent()
            assert r.returncode == 0, r.stderr
            for k, (a, b) in enumerate(zip(before, after)):
                spent[k] += b - a
            text += r.stdout
            return sum(int(line.rpartition(" ")[2])
                       for line in text.splitlines()) >= 3000
        until_shown(run)
    finally:
        w.close()
    own = [x / sum(spent) for x in spent]
    got, none = phase_shares(text)
    wrong = sum(int(line.rpartition(" ")[2]) for line in text.splitlines()
                if ("pstdev", "values") in accuracy.pairs(line.rpartition(" ")[0]))
    return (0.5 * sum(abs(a - b) for a, b in zip(own, got)), none, own, got,
            wrong)


def failed_of(stderr):
    """The failed samples of a run's summary line on stderr."""
    m = re.search(r"samples in .*, (\d+) failed \(", stderr)
    assert m, stderr
    return int(m.group(1))


@pytest.mark.sanitized
@pytest.mark.parametrize("label,python", KINDS, ids=[p[0] for p in KINDS])
@pytest.mark.parametrize("mode", ["stdlib", "threads", "shortgen"])
def test_churny_targets_are_read_cleanly(label, python, mode):
    """The accuracy tests' targets, read by the sanitized build: the rules'
    rescues (generators found by what holds them, calls met in a slot,
    eval loops gone by their copy) run on stacks that change under every
    read, and a slip in one was found only by the release build's
    accuracy run (a crash, 90b2853).  Every sample counted, and no report
    from ASan or UBSan (which make the run fail)."""
    w = Workload(python, mode)
    counted = 0
    # (the threads of "threads": six workers and the main thread)
    stacks = 7 if mode == "threads" else 1

    def run(_):  # (runs until 500 samples: the ASan build reads slowly)
        nonlocal counted
        r = pyunwind("sample", "-r", "2000", "-d", "1.5", "--format",
                     "collapsed", str(w.pid), timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        assert "Sanitizer" not in r.stderr and \
            "runtime error" not in r.stderr, r.stderr
        total, _, unknown = accuracy.impossible(r.stdout)
        # a stack with <unknown> in it is a failed sample, never a clean
        # one: the summary counts each sample that has one (on 3.11.7 the
        # summary once said 0 failed of a profile 13 % <unknown>)
        failed = failed_of(r.stderr)
        assert failed * stacks >= unknown, (failed, unknown, r.stderr)
        counted += total
        return counted > 500
    try:
        until_shown(run)
    finally:
        w.close()


# Before 3.15, impossible stacks come in bursts on a loaded machine: a
# run (a new target process) has none, or a few dozen in 40,000 samples
# (bench/README.md: 2 of 53 runs of 3.10 and of 3.12 while the suite ran
# beside, 0.8 to 1.75 in 1,000, past a run's bound).  A burst is the
# benchmark's to count; what a test must catch is a rate the rules let
# through in every run (3.11 had 1 in 100 in every run until 28f1d22).
# So a run past its bound is made again on a new process, up to TRIES
# runs in all: at 1 run in 25 with a burst, three in a row come by chance
# once in about 15,600 tests.
TRIES = 3


def impossible_runs(python, mode, allowed, *args):
    """impossible_run() again on a new process while its impossible stacks
    are more than allowed(total) of them, TRIES runs at most: the last."""
    for _ in range(TRIES):
        got = impossible_run(python, mode, *args)
        if got[1] <= allowed(got[0]):
            break
    return got


def impossible_run(python, mode, *args):
    """10,000 samples or more, 20,000 a second, of workloads.py MODE
    (pyunwind sample's ARGS too): (samples, impossible ones, ones with
    <unknown>, failed ones, the collapsed text)."""
    w = Workload(python, mode)
    text = ""
    failed = 0

    def run(_):  # (runs until 10,000 samples: the ASan build, or a loaded
        # machine, reads fewer than 20,000 a second)
        nonlocal text, failed
        r = pyunwind("sample", "-r", "20000", "-d", "2", "--format",
                     "collapsed", *args, str(w.pid), timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        text += r.stdout
        failed += failed_of(r.stderr)
        return accuracy.impossible(text)[0] > 10000
    try:
        until_shown(run)
    finally:
        w.close()
    return accuracy.impossible(text) + (failed, text)


@pytest.mark.parametrize("label,python", PYTHONS, ids=IDS)
def test_no_impossible_stacks(label, python, workdir):
    """20,000 samples a second of a target whose stacks never stand still:
    no stack it cannot have (3.15, whose anchors prove stacks: none;
    before the rules, 33 of 11,553 on 3.14 and 60 of 16,416 on 3.13t), and
    every sample counted, almost all of them read whole.  Before 3.15 a
    copy can mix two turns of the loop (accept.c), which the rules must
    refuse: bench/impossible-run measured none in two million samples or
    more on every interpreter (bench/README.md, 2026-12-07; 3.11 had 1 in
    100, b1 -> leaf, in every run until 28f1d22).  A run allows 1 in
    10,000, and one past it is made again on a new process (TRIES): a
    build at the goal's 1 in a million, 0.01 to 0.04 impossible stacks
    expected in a run of 10,000 to 40,000, fails three such runs in a row
    far less than once in 10,000.  3.15 has no such room, and no second
    run."""
    if label.startswith("3.15"):
        got = impossible_run(python, "alternate")
        allowed = 0
    else:
        got = impossible_runs(python, "alternate", lambda n: n // 10000)
        allowed = got[0] // 10000
    total, bad, unknown, failed, text = got
    assert total > 10000, total
    assert bad <= allowed, (bad, total)
    assert unknown * 100 <= total, (unknown, total)
    assert failed >= unknown, (failed, unknown)  # (one thread)
    # both halves of the loop are there, about equally
    got = collapsed_funcs(text)
    a, b = got.get("a1", 0), got.get("b1", 0)
    assert a > total / 5 and b > total / 5, (a, b, total)


# (the release build's: the ASan+UBSan build copies the frames slowly
# enough that a torn pair of copies passes the rules more often -- 4.7
# and 19 in 1,000 on 3.9.2 in its runs of 2026-12-07, before the rules
# on calls by name -- a question for the rules, not the build)
@pytest.mark.release
@pytest.mark.parametrize("where", ["own-cpu", "other-cpu"])
@pytest.mark.parametrize("label,python", OBJECT_FRAMES,
                         ids=[p[0] for p in OBJECT_FRAMES])
def test_no_impossible_stacks_of_reused_frame_objects(label, python, where):
    """3.9 and 3.10: a frame object that returns goes to a free list (or
    stays as its code's zombie), and the next call of any function may
    take it.  workloads.py recurring has each function call itself once,
    so the frame objects of c1's calls are d1's a moment later: before the
    second copy (objects.c) 1 in 5 to 1 in 19 of its stacks, read at 20
    kHz, had a frame under a caller that never calls it (c1 -> d2), or a
    frame alone (c2, a copy of a frame object on the free list).
    Read from another CPU than the target's (--other-cpu; and what a run
    on a loaded machine does when it leaves the target's CPU), a copy
    lasts longer than a turn of the loop, and two copies alike were torn
    alike: 0.3 to 22 in 1,000 on 3.9.2 from one process to the next, the
    worst run 28 (CI's failure: 4.5, on the target's CPU of a loaded
    machine), before the rule on calls by name (accept.c,
    pyu_accept_uncalled()); with it 0.1 to 0.5 in 1,000, the worst of
    about 50 runs 1.2 (bench/impossible-run WORKLOAD=recurring
    ARGS=--other-cpu, bench/README.md).  They come in bursts: the bound
    is 5 in 1,000 a run, four times the worst run seen, and a run past
    it is made again on a new process (TRIES): CI's failure of stop 59
    was one such burst; the lines of callers are the benchmark's
    (LINES=1)."""
    args = ["--other-cpu"] if where == "other-cpu" else []
    total, bad, unknown, failed, text = impossible_runs(
        python, "recurring", lambda n: n * 5 // 1000, *args)
    assert total > 10000, total
    assert bad <= total * 5 // 1000, (bad, total)
    # (read from another CPU at 20 kHz, a walk of this loop fails its
    # nine tries in 0.9 to 1.1 % of the samples, in runs where the build
    # before the rules failed as many: the bound is the rules' room, not
    # the accuracy tests' 1 %)
    assert unknown * 20 <= total, (unknown, total)
    assert failed >= unknown, (failed, unknown)  # (one thread)
    # both halves of the loop are there.  (3.9 spends most of the loop
    # in recurring() itself, making the frames it calls: c1 and d1 are
    # each on about 0.20 of the stacks, which the bound total / 5 split
    # in two -- it failed 1 run in 4.  A tenth is far below that: over
    # 10,000 samples its standard deviation is 0.004.)
    got = collapsed_funcs(text)
    assert got.get("c1", 0) > total / 10 and \
        got.get("d1", 0) > total / 10, got


def collapsed_funcs(text):
    """{function: samples with it anywhere on the stack}."""
    out = {}
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        for f in {f.split(":")[-2] for f in stack.split(";")
                  if f.count(":") >= 2}:
            out[f] = out.get(f, 0) + int(n)
    return out
