"""pyunwind sample: the sampling profiler, against targets with a known
split of wall time (tests/targets/split.py), CPython's own sampler on the
same process, and a reader that stops the target for every sample.

Truth comes from outside pyunwind: split.py measures its busy loops by the
clock (three() 3 ms, one() 1 ms), records which thread plays which role,
and `python3.15 -m profiling.sampling` reads the same process."""

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import (DEADLINE, PYUNWIND, ROOT, RUNNING, Sampling, TARGETS,
                      TIMEOUT, Target, allow_core, interpreters, labelled,
                      longer, matrix, pyunwind, samples_for, until_shown)

PYTHONS = interpreters()
BY_LABEL = dict(PYTHONS)
SAMPLE_PAIR = os.path.join(os.path.dirname(PYUNWIND), "sample_pair")
# the tests that need no particular version run on these
SOME = [p for p in PYTHONS
        if p[0] in ("3.11.2-debian", matrix("3.13t"), matrix("3.14"),
                    "3.15.2-debian")]
PY315 = [p for p in PYTHONS if p[0].startswith("3.15")]
# the frame objects of 3.9 and 3.10 (their own walk, objects.c)
OBJECTS = [p for p in PYTHONS if p[0] in ("3.9.2-bullseye",
                                          "3.10.13-pyenv-stripped")]
LINE = re.compile(r"^tid:(\d+)((?:;[^;]*)*) (\d+)$")


def collapsed(text):
    """{native thread id: [(frames outermost first, count)]}: the collapsed
    format as flamegraph.pl parses it (frames split on ';', count last)."""
    out = collections.defaultdict(list)
    for line in text.splitlines():
        m = LINE.match(line)
        assert m, "not a collapsed line: %r" % line
        frames = m.group(2).split(";")[1:]
        out[int(m.group(1))].append((frames, int(m.group(3))))
    return out


def count(stacks, pred):
    return sum(n for frames, n in stacks if pred(frames))


def calls(frames, func):
    return any(f.split(":")[1:2] == [func] for f in frames)


def sample(pid, *args, timeout=TIMEOUT):
    r = pyunwind("sample", *args, str(pid), timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r


def split_target(python, workdir, *args):
    return Target(python, "split.py", workdir, args, expect_threads=False)


def split_count(stacks):
    """The samples of stacks in three() or one()."""
    return count(stacks, lambda f: calls(f, "three") or calls(f, "one"))


def enough(stacks, tolerance=0.06):
    """stacks hold the samples assert_split needs to judge the split to
    tolerance (conftest.samples_for: a false failure in 10,000 runs at
    most)."""
    return split_count(stacks) >= samples_for(tolerance)


def assert_split(stacks, tolerance=0.06):
    """three() holds 3/4 of the main thread's busy samples, one() 1/4:
    judged on enough samples (enough()), which a test gathers by running
    the sampler again or longer until it has them, never by expecting
    them of a run of fixed length."""
    three = count(stacks, lambda f: calls(f, "three"))
    one = count(stacks, lambda f: calls(f, "one"))
    assert three + one >= samples_for(tolerance), (three, one, stacks[:5])
    share = three / (three + one)
    assert abs(share - 0.75) < tolerance, (three, one)
    return share


def state_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_wall_mode_shows_the_split(label, python, workdir):
    t = split_target(python, workdir)
    try:
        roles = t.truth["roles"]
        main = []

        def attempt(_):  # (runs of 2 s until the split can be judged)
            r = sample(t.pid, "-d", "2", "--format", "collapsed")
            got = collapsed(r.stdout)
            main.extend(got[roles["main"]])
            # the sleeping thread is sampled too, in time.sleep's caller
            sleeping = count(got[roles["sleeper"]],
                             lambda f: f and f[-1].split(":")[1] == "sleeper")
            busy = sum(n for _, n in got[roles["main"]])
            assert sleeping > busy * 0.9, (sleeping, busy)
            assert "samples in" in r.stderr and "failed" in r.stderr
            assert state_of(t.pid) in RUNNING
            return enough(main)
        until_shown(attempt)
        assert_split(main)
    finally:
        t.close()


@pytest.mark.parametrize("label,python", SOME, ids=[p[0] for p in SOME])
@pytest.mark.parametrize("mode", ["cpu", "gil"])
def test_cpu_and_gil_modes_leave_out_the_sleeper(label, python, mode,
                                                 workdir):
    t = split_target(python, workdir)
    try:
        roles = t.truth["roles"]
        main = []
        # only the samples that find the main thread on a CPU (or holding
        # the GIL) count: on a loaded machine that can be few, so the run
        # is repeated until there are enough to judge the split by
        def attempt(_):
            r = sample(t.pid, "-d", "1.5", "--mode", mode, "--format",
                       "collapsed")
            got = collapsed(r.stdout)
            assert roles["sleeper"] not in got, got[roles["sleeper"]][:3]
            main.extend(got.get(roles["main"], []))
            return enough(main, 0.1)
        until_shown(attempt)
        assert_split(main, tolerance=0.1)
    finally:
        t.close()


@pytest.mark.parametrize("label,python", SOME, ids=[p[0] for p in SOME])
def test_exception_mode_keeps_what_runs_in_except(label, python, workdir):
    t = split_target(python, workdir, "--handler")
    try:
        roles = t.truth["roles"]
        stacks = []

        def attempt(_):  # (runs of 2 s until 2,000 samples in except)
            r = sample(t.pid, "-d", "2", "--mode", "exception", "--format",
                       "collapsed")
            got = collapsed(r.stdout)
            assert set(got) <= {roles["handler"]}, sorted(got)
            stacks.extend(got.get(roles["handler"], []))
            return count(stacks, lambda f: calls(f, "in_except")) >= 2000
        until_shown(attempt)
        inside = count(stacks, lambda f: calls(f, "in_except"))
        # (the status is the thread state's, the stack is copied a
        # microsecond later: a sample that straddles the end of the except
        # block can show no_except's frame, the one in_except's was popped
        # for; 1 in 100 allows for a slow (ASan) read, 0-3 in 1,000 seen.
        # Judged on 2,000 samples in except or more: at a rate of 3 in
        # 1,000, more than 20 of 2,000 is a chance of 1.5e-6 (Poisson))
        outside = count(stacks, lambda f: calls(f, "no_except"))
        assert outside * 100 <= inside, (outside, inside)
    finally:
        t.close()


@pytest.mark.parametrize("label,python", PY315, ids=[p[0] for p in PY315])
def test_agrees_with_cpythons_sampler(label, python, workdir):
    """python3.15 -m profiling.sampling reads the same process: the main
    thread's split agrees within a few points, and both see the sleeper."""
    t = split_target(python, workdir)
    try:
        out = os.path.join(workdir, "tachyon.txt")
        roles = t.truth["roles"]
        main = {"ours": [], "theirs": []}
        sleeper = {"ours": [], "theirs": []}

        # (runs of 2 s of each until both have the samples that judge the
        # difference of the two splits to 0.05)
        def attempt(_):
            r = subprocess.run([python, "-m", "profiling.sampling", "attach",
                                "-a", "-r", "1khz", "-d", "2", "--collapsed",
                                "-o", out, str(t.pid)], capture_output=True,
                               text=True, timeout=TIMEOUT)
            assert r.returncode == 0, r.stderr
            with open(out, encoding="utf-8") as f:
                theirs = collapsed(f.read())
            ours = collapsed(sample(t.pid, "-d", "2", "--format",
                                    "collapsed").stdout)
            for who, got in (("ours", ours), ("theirs", theirs)):
                assert roles["sleeper"] in got, (who, sorted(got))
                main[who].extend(got[roles["main"]])
                sleeper[who].extend(got[roles["sleeper"]])
            need = samples_for(0.05, pairs=2)
            return all(split_count(m) >= need for m in main.values())
        until_shown(attempt)
        a = assert_split(main["ours"])
        b = assert_split(main["theirs"])
        assert abs(a - b) < 0.05, (a, b)
        # the same frames, named the same way
        name = lambda st: {";".join(f) for f, _ in st}
        common = name(sleeper["ours"]) & name(sleeper["theirs"])
        assert common, (sleeper["ours"][:2], sleeper["theirs"][:2])
    finally:
        t.close()


@pytest.mark.parametrize("label,python", PY315 + OBJECTS,
                         ids=[p[0] for p in PY315 + OBJECTS])
def test_frame_cache_gives_the_profile_of_full_reads(label, python, workdir):
    """The same samples read with the frame cache (and its anchor, 3.15)
    and without: identical profiles, on a thread whose stack never rests
    (3.9 and 3.10: frame objects the calls take from the code objects'
    and the free list's, the profile's nodes kept from sample to
    sample)."""
    if not os.path.exists(SAMPLE_PAIR):
        pytest.skip("sample_pair not built")
    t = split_target(python, workdir, "--churn")
    try:
        a, b = (os.path.join(workdir, n) for n in ("cached.txt", "full.txt"))
        r = subprocess.run([SAMPLE_PAIR, str(t.pid), "600", a, b],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        stats = dict(zip(r.stdout.split()[::2],
                         map(int, r.stdout.split()[1::2])))
        if label.startswith("3.15"):
            assert stats["full"] > 100, stats  # the anchor proved stacks
        else:  # (each stack read, its nodes from the cache)
            assert stats["miss"] > 100, stats
        with open(a) as f, open(b) as g:
            cached, full = f.read(), g.read()
        assert cached == full
        churn = collapsed(cached)[t.truth["roles"]["churn"]]
        assert len(churn) > 20  # many different stacks
        assert state_of(t.pid) in RUNNING
    finally:
        t.close()


def test_interrupt_keeps_the_profile(workdir):
    python = (PY315 or PYTHONS)[0][1]
    t = split_target(python, workdir)
    try:
        # (interrupted once it has the samples the split is judged on,
        # with room for the main thread's few outside three() and one())
        with Sampling("--format", "collapsed", str(t.pid)) as s:
            s.wait_for(samples_for(0.1) * 3 // 2)
            code, out, err = s.finish(signal.SIGINT)
        assert code == 0, err
        assert "interrupted" in err
        assert_split(collapsed(out)[t.truth["roles"]["main"]], tolerance=0.1)
        for _ in range(20):  # never left stopped
            assert state_of(t.pid) in RUNNING
            time.sleep(0.01)
    finally:
        t.close()


def test_target_exit_ends_the_run(workdir):
    """A target that exits mid-run (split.py ends on SIGUSR1, sent once
    the run has the samples the split is judged on): the run ends there,
    with the profile so far.  It was asked for an hour: a run that did not
    end at the exit would run into Sampling.finish's timeout."""
    python = (PY315 or PYTHONS)[0][1]
    t = split_target(python, workdir)
    try:
        with Sampling("-d", "3600", "--format", "collapsed", str(t.pid)) as s:
            s.wait_for(samples_for(0.1) * 3 // 2)
            os.kill(t.pid, signal.SIGUSR1)
            code, out, err = s.finish()
        assert code == 0, err
        assert "the target exited" in err, err
        assert_split(collapsed(out)[t.truth["roles"]["main"]],
                     tolerance=0.1)
    finally:
        t.close()


def test_status_line_on_a_terminal(workdir):
    """With standard error on a terminal: a status line that is rewritten
    in place while it samples, cleared before the summary."""
    import pty
    python = (PY315 or PYTHONS)[0][1]
    t = split_target(python, workdir)
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([PYUNWIND, "sample", "-d", "1.2", "--format",
                              "collapsed", str(t.pid)],
                             stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        data = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            data += chunk
        p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0
        text = data.decode()
        lines = re.findall(r"\rpyunwind: sampling ([\d.]+)/1\.2 s, (\d+) "
                           r"samples \(\d+/s\), (\d+) failed, (\d+) missed",
                           text)
        assert len(lines) >= 2, text
        assert int(lines[-1][1]) > int(lines[0][1])  # it moves
        assert "\r\033[Kpyunwind: " in text  # cleared, then the summary
    finally:
        os.close(master)
        t.close()


def test_output_that_cannot_be_written_is_refused_first(workdir):
    """-o into a directory that does not exist: the one-line error before
    the first sample, not after a run of 30 s (no summary line: nothing was
    sampled), and before a program is started; `report` the same before it
    reads its capture."""
    python = (PY315 or PYTHONS)[0][1]
    t = split_target(python, workdir)
    try:
        bad = os.path.join(workdir, "no", "such", "profile.html")
        r = pyunwind("sample", "-d", "30", "-o", bad, str(t.pid))
        assert r.returncode == 1, r.stderr
        assert r.stderr == "pyunwind: error: cannot write %s: No such file " \
            "or directory\n" % bad, r.stderr
        r = pyunwind("sample", "-o", bad, "--", python, "-c", "pass")
        assert r.returncode == 1 and "cannot write" in r.stderr, r.stderr
        capture = os.path.join(workdir, "c.raw")
        r = pyunwind("sample", "-d", "0.2", "--format", "raw", "-o", capture,
                     str(t.pid))
        assert r.returncode == 0, r.stderr
        r = pyunwind("report", "-o", bad, capture)
        assert r.returncode == 1, r.stderr
        assert r.stderr == "pyunwind: error: cannot write %s: No such file " \
            "or directory\n" % bad, r.stderr
    finally:
        t.close()


def test_py_spys_words(workdir):
    """py-spy's command line, as a py-spy user types it: record and top
    are sample (top: --live), --pid/-p a PID, --rate and --duration -r
    and -d, --gil and --idle modes, --nonblocking the default; words with
    no such match are answered with pyunwind's way, and an .svg name is
    refused (no SVG here); PROGRAM's own words after -- are its."""
    python = (PY315 or PYTHONS)[0][1]
    t = split_target(python, workdir)
    try:
        out = os.path.join(workdir, "profile.html")
        r = pyunwind("record", "-o", out, "--pid", str(t.pid), "--duration",
                     "0.5", "--rate", "200", "--nonblocking")
        assert r.returncode == 0, r.stderr
        assert "wrote %s (flamegraph" % out in r.stderr, r.stderr
        assert open(out).read().startswith("<!DOCTYPE html>")
        r = pyunwind("record", "-p", str(t.pid), "-d", "0.3", "--gil")
        assert r.returncode == 0 and " gil mode, " in r.stdout, r.stdout
        r = pyunwind("record", "--pid=%d" % t.pid, "-d", "0.3", "--idle")
        assert r.returncode == 0 and " wall mode, " in r.stdout, r.stdout
        a = pyunwind("dump", "--json", "--pid", str(t.pid))
        assert a.returncode == 0, a.stderr
        assert json.loads(a.stdout)["pid"] == t.pid
        r = pyunwind("record", "--threads", "--pid", str(t.pid))
        assert r.returncode == 2 and r.stderr == (
            "pyunwind: error: '--threads' is py-spy's: every profile keeps "
            "each thread's stacks apart (collapsed: tid:N first); --thread "
            "TID keeps one\n"), r.stderr
        r = pyunwind("record", "-o", os.path.join(workdir, "p.svg"),
                     "--pid", str(t.pid))
        assert r.returncode == 2 and "writes no SVG" in r.stderr, r.stderr
        r = pyunwind("sample", "--", python, "-c",
                     "import sys; print(sys.argv[1:])", "--pid", "5",
                     "--rate", "3")
        assert r.stdout.splitlines()[0] == "['--pid', '5', '--rate', '3']", \
            r.stdout
    finally:
        t.close()


@pytest.mark.parametrize("processes", [1, 2])
def test_a_rate_past_the_target_says_why(processes, workdir):
    """-r 1000k asks a tick a microsecond: more than a read of another
    process can serve (a sample of split.py takes a few microseconds on
    any machine, and a busy one only makes it longer), so most ticks are
    missed, and the summary says why: with the rate asked, the time a
    sample (or a tick of every process) took on average, what that
    allows back to back, and that the rate asked is more than the target
    allows when the average is past 0.9 of the interval.  The clause is
    judged against the line's own figures, never against a clock."""
    python = (PY315 or PYTHONS)[0][1]
    targets = [split_target(python, workdir) for _ in range(processes)]
    try:
        r = pyunwind("sample", "-r", "1000k", "-d", "0.5", "--format",
                     "collapsed", *[str(t.pid) for t in targets])
        assert r.returncode == 0, r.stderr
        m = re.search(r"missed of (\d+) ticks \(([\d.]+)%\)", r.stderr)
        assert m and float(m.group(2)) > 1, r.stderr
        why = re.search(r"why ticks were missed \(1000000/s asked, one tick "
                        r"every 1\.0 us; a (sample|tick \(every process "
                        r"once\)) took ([\d.]+) us on average, at most "
                        r"about (\d+)/s back to back, -r max\): (\d+) after "
                        r"ticks that took long \(up to [\d.]+ us: "
                        r"([^)]*)\)", r.stderr)
        assert why, r.stderr
        assert why.group(1) == ("sample" if processes == 1 else
                                "tick (every process once)"), r.stderr
        avg = float(why.group(2))
        # (the average is printed to 0.1 us, the rate from the exact one)
        assert 1e6 / (avg + 0.05) - 1 <= int(why.group(3)) <= \
            1e6 / max(avg - 0.05, 0.01) + 1, r.stderr
        assert 0 < int(why.group(4)) <= int(m.group(1))
        if abs(avg - 0.9) > 0.05:  # (the line's average is rounded)
            assert (why.group(5) == "the rate asked is more than " +
                    ("this target allows" if processes == 1 else
                     "these targets allow")) == (avg > 0.9), r.stderr
    finally:
        for t in targets:
            t.close()


def test_target_exec_ends_the_run(workdir):
    """A target that runs exec mid-run (here into a shell script that
    sleeps): the run ends at once, with the profile so far."""
    python = (PY315 or PYTHONS)[0][1]
    script = os.path.join(workdir, "after.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec sleep 60\n")
    os.chmod(script, 0o755)
    # (the exec once the run has the samples the split is judged on: on
    # SIGUSR1; the run, asked for an hour, ends at it or runs into
    # Sampling.finish's timeout)
    t = split_target(python, workdir, "--exec", script)
    try:
        with Sampling("-d", "3600", "--format", "collapsed", str(t.pid)) as s:
            s.wait_for(samples_for(0.1) * 3 // 2)
            os.kill(t.pid, signal.SIGUSR1)
            code, out, err = s.finish()
        assert code == 0, err
        assert "the target ran exec" in err, err
        assert_split(collapsed(out)[t.truth["roles"]["main"]],
                     tolerance=0.1)
    finally:
        t.close()


def test_sigterm_during_blocking_run_leaves_target_running(workdir):
    """--blocking stops the target for every sample; SIGTERM to pyunwind
    mid-run ends the run, writes the profile, and the target runs on."""
    python = (PY315 or PYTHONS)[0][1]
    t = split_target(python, workdir)
    try:
        with Sampling("--blocking", "--format", "collapsed", str(t.pid)) as s:
            s.wait_for(100)  # (mid-run: stopping the target for its samples)
            code, out, err = s.finish(signal.SIGTERM)
        assert code == 0, err
        assert "interrupted" in err
        assert collapsed(out)[t.truth["roles"]["main"]]
        for _ in range(50):
            assert state_of(t.pid) in RUNNING
            time.sleep(0.01)
        with open("/proc/%d/status" % t.pid) as f:
            assert "TracerPid:\t0\n" in f.read()
    finally:
        t.close()


def test_blocking_run_hands_on_every_signal(workdir):
    """A signal sent while --blocking stops the target (or just as it does)
    reaches it all the same: 2,000 real-time signals or more during a run
    at -r max against a target that counts them (tests/targets/signals.py),
    all arrive.  (A thread caught on a signal's way in was let go with the
    signal dropped: 6-9 of 2,000 were lost.)"""
    python = next((py for label, py in PYTHONS if label == matrix("3.13t")),
                  PYTHONS[0][1])
    t = subprocess.Popen([python, os.path.join(TARGETS, "signals.py"), "2"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert t.stdout.readline() == "ready\n"
        with Sampling("--blocking", "-r", "max", "-d", "3600", "--format",
                      "collapsed", str(t.pid), stdout=subprocess.DEVNULL) as s:
            s.wait_for(1)  # (the run has begun: the signals come during it)
            # at least 2,000 signals, and on until the run has stopped the
            # target 400 times while they came (a few hundred stops a second:
            # 470-1,500; fewer on a loaded machine, which takes longer)
            first, sent = s.samples(), 0
            deadline = time.monotonic() + DEADLINE
            while sent < 2000 or s.samples() - first < 400:
                assert time.monotonic() < deadline, (sent, s.samples() - first)
                for _ in range(100):
                    os.kill(t.pid, signal.SIGRTMIN + 1)
                    time.sleep(0.0005)
                sent += 100
            code, _, err = s.finish(signal.SIGINT)
        assert code == 0 and "0 failed" in err, err
        t.stdin.write("\n")
        t.stdin.flush()
        assert t.stdout.readline() == "%d\n" % sent
    finally:
        t.kill()
        t.wait()


def test_sigkill_while_holding_the_target_leaves_it_running(workdir):
    """A --blocking sampler and a dump killed outright (SIGKILL, as the OOM
    killer does) at random moments, many of them while they hold the
    target stopped: the kernel lets the target go (PTRACE_SEIZE and
    PTRACE_INTERRUPT, never a pending SIGSTOP), every thread runs on and
    nothing traces it."""
    import random
    python = (PY315 or PYTHONS)[0][1]
    t = split_target(python, workdir, "--churn")
    rng = random.Random(5)
    try:
        for i in range(16):
            argv = ([PYUNWIND, "sample", "--blocking", "-r", "max",
                     "--format", "collapsed", str(t.pid)] if i % 2 == 0
                    else [PYUNWIND, "dump", str(t.pid)])
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.005, 0.3) if i % 2 == 0
                       else rng.uniform(0, 0.004))
            p.kill()
            p.wait()
            time.sleep(0.05)
            states = {}
            for tid in os.listdir("/proc/%d/task" % t.pid):
                try:
                    states[tid] = state_of_task(t.pid, tid)
                except OSError:
                    pass  # (a thread that ended)
            assert not any(s in "tT" for s in states.values()), (i, states)
            with open("/proc/%d/status" % t.pid) as f:
                assert "TracerPid:\t0\n" in f.read(), i
    finally:
        t.close()


def state_of_task(pid, tid):
    with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize("label,python", SOME, ids=[p[0] for p in SOME])
def test_launch_mode_profiles_the_program_to_its_exit(label, python,
                                                     workdir):
    truth = os.path.join(workdir, "truth.json")
    main = []

    def attempt(_):  # (programs of 1.5 s until the split can be judged)
        r = subprocess.run([PYUNWIND, "sample", "--format", "collapsed", "--",
                            python, os.path.join(TARGETS, "split.py"), truth,
                            "--seconds", "1.5", "--exit", "3"],
                           capture_output=True, text=True, timeout=TIMEOUT,
                           cwd=workdir)
        assert r.returncode == 3, r.stderr  # the program's own exit status
        got = collapsed(r.stdout.replace("ready\n", ""))
        with open(truth) as f:
            roles = json.load(f)["roles"]
        main.extend(got[roles["main"]])
        return enough(main, 0.1)
    until_shown(attempt)
    assert_split(main, tolerance=0.1)


def test_launch_mode_reports_a_program_that_is_not_python(workdir):
    """A program that is not Python exits 4 (not Python), not with its own
    status, and the line says how it ended.  (It runs long enough to be
    looked at: one that ends before the first look cannot be told from a
    Python program that ended as fast, and gives its own status.)"""
    r = subprocess.run([PYUNWIND, "sample", "--", "sleep", "2"],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 4, r.stderr
    assert r.stderr == (
        "pyunwind: error: the program ended (exit status 0) before a "
        "CPython runtime could be read in it: no CPython runtime found (no "
        ".PyRuntime section, _PyRuntime symbol or debug offsets cookie): "
        "not a CPython 3.9+ program\n"), r.stderr
    r = subprocess.run([PYUNWIND, "sample", "--", "/nonexistent/x"],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 3 and "cannot run" in r.stderr, r.stderr


@pytest.mark.parametrize("label,python", PY315[:1],
                         ids=[p[0] for p in PY315[:1]])
def test_blocking_and_read_only(label, python, workdir):
    t = split_target(python, workdir)
    try:
        for opts, anchors in ((["--blocking"], "on"),
                              (["--read-only"], "off"),
                              (["--no-cache"], "off")):
            main = []

            def attempt(_):  # (runs of 1 s until the split can be judged)
                r = sample(t.pid, "-d", "1", "--verbose", "--format",
                           "collapsed", *opts)
                main.extend(collapsed(r.stdout)[t.truth["roles"]["main"]])
                assert "anchors %s" % anchors in r.stderr, r.stderr
                if anchors == "off":
                    assert ", 0 written" in r.stderr
                assert state_of(t.pid) in RUNNING
                return enough(main, 0.1)
            until_shown(attempt)
            assert_split(main, tolerance=0.1)
    finally:
        t.close()


@pytest.mark.parametrize("label,python", PY315[:1],
                         ids=[p[0] for p in PY315[:1]])
def test_an_anchor_another_profiler_left(label, python, workdir):
    """CPython's own unwinder with its frame cache (Tachyon's) writes the
    same anchor, and leaves it naming each thread's frame: a stack whose
    innermost frame the anchor already names is proven by it (CPython moves
    it off a frame that returns, whoever wrote it), not read whole in every
    sample from then on."""
    t = split_target(python, workdir)
    try:
        # (CPython's reader of a running target fails now and then:
        # "Failed to parse initial frame in chain")
        # (100 reads that succeed, however many a loaded machine fails)
        code = ("import _remote_debugging, sys, time\n"
                "u = _remote_debugging.RemoteUnwinder(int(sys.argv[1]), "
                "all_threads=True, cache_frames=True)\n"
                "ok = tries = 0\n"
                "while ok < 100 and tries < 20000:\n"
                "    tries += 1\n"
                "    try:\n"
                "        u.get_stack_trace(); ok += 1\n"
                "    except RuntimeError:\n"
                "        pass\n"
                "    time.sleep(0.001)\n"
                "sys.exit(0 if ok >= 100 else 1)\n")
        r = subprocess.run([python, "-c", code, str(t.pid)],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        main = []

        def attempt(_):  # (runs of 1 s until the split can be judged)
            r = sample(t.pid, "-d", "1", "--verbose", "--format",
                       "collapsed")
            m = re.search(r"(\d+) stacks, .* stacks: (\d+) from the cache",
                          r.stderr)
            assert m, r.stderr
            # (the sleeper and the spinning thread stay in one frame)
            assert int(m.group(2)) > int(m.group(1)) // 4, r.stderr
            main.extend(collapsed(r.stdout)[t.truth["roles"]["main"]])
            return enough(main, 0.1)
        until_shown(attempt)
        # and what the proofs gave is the target's own split
        assert_split(main, tolerance=0.1)
    finally:
        t.close()


@pytest.mark.parametrize("label,python", PY315[:1],
                         ids=[p[0] for p in PY315[:1]])
def test_the_anchor_under_short_calls(label, python, workdir):
    """A loop that calls short functions (workloads.py calls: a few
    microseconds each, two levels deep) never stands still in one frame:
    the anchor stays on the loop's frame, which proves everything below
    it, and the calls above it are read in the window that comes with the
    thread state -- one read a sample, not the stack read whole."""
    p = subprocess.Popen([python, os.path.join(TARGETS, "workloads.py"),
                          "calls"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        # (runs of 1 s, their counts added up, until 2,000 stacks: the
        # shares below are judged on that many, however few a loaded
        # machine or the ASan build reads in a second)
        samples = stacks = reads = full = part = 0
        leaves = collections.Counter()

        def attempt(_):
            nonlocal samples, stacks, reads, full, part
            r = sample(p.pid, "-d", "1", "-r", "2000", "--verbose",
                       "--format", "collapsed")
            samples += int(re.search(r"pyunwind: (\d+) samples in",
                                     r.stderr).group(1))
            m = re.search(r"(\d+) stacks, (\d+) reads \([\d.]+ a sample.*"
                          r"stacks: (\d+) from the cache but the innermost "
                          r"frame, (\d+) from the cache but the frames "
                          r"above the anchor", r.stderr)
            assert m, r.stderr
            stacks, reads, full, part = (
                a + int(b) for a, b in zip((stacks, reads, full, part),
                                           m.groups()))
            # (what the window showed is what the loop calls)
            for line in r.stdout.splitlines():
                stack, n = line.rsplit(" ", 1)
                leaf = stack.split(";")[-1]
                leaves[leaf.split(":")[1] if ":" in leaf else leaf] += int(n)
            return stacks >= 2000
        until_shown(attempt)
        assert part > stacks // 2 and full + part > stacks * 8 // 10, \
            (stacks, full, part)
        assert reads < 1.5 * samples, (reads, samples)  # (a sample's)
        # (a call that took the slot of the one the thread state named,
        # not yet met there, is <unknown>: rare)
        assert leaves["<unknown>"] < stacks // 100, leaves
        assert {"score", "process", "classify"} <= set(leaves), leaves
        assert leaves["score"] > leaves["process"] > leaves["weight"], leaves
    finally:
        p.kill()
        p.wait()
        p.stdout.close()


NO_ANCHOR = [p for p in PYTHONS if not p[0].startswith("3.15")]


@pytest.mark.parametrize("label,python", NO_ANCHOR + PY315[:1],
                         ids=[p[0] for p in NO_ANCHOR + PY315[:1]])
def test_without_anchors_two_reads_a_sample(label, python, workdir):
    """Without an anchor to write (3.13, 3.14; 3.15 with --read-only) the
    sampler reads each stack whole, and still in two reads a sample in the
    steady state: the thread states with where their frames lay, then
    every thread's second copies (and 3.13's code objects).  The split
    stays the target's own."""
    t = split_target(python, workdir)
    try:
        main = []

        def attempt(_):  # (runs of 1 s until the split can be judged)
            r = sample(t.pid, "-d", "1", "--verbose", "--format",
                       "collapsed",
                       *(["--read-only"] if label.startswith("3.15") else []))
            main.extend(collapsed(r.stdout)[t.truth["roles"]["main"]])
            m = re.search(r"(\d+) reads \(([\d.]+) a sample", r.stderr)
            assert m and float(m.group(2)) < 3.0, r.stderr
            assert "anchors off" in r.stderr, r.stderr
            return enough(main, 0.1)
        until_shown(attempt)
        assert_split(main, tolerance=0.1)
    finally:
        t.close()


@pytest.mark.parametrize("label,python", OBJECTS, ids=[p[0] for p in OBJECTS])
def test_many_threads_two_reads_a_sample(label, python, workdir):
    """3.9 and 3.10 name a thread by its pthread_t, whose kernel id the
    sampler reads once and remembers: with 48 threads parked, a sample
    still takes the thread states and frames in one read and the code
    objects in a second.  (A memo that put two pthread_ts in one place read
    both ids at each sample: about 50 reads a sample here, and 4 instead of
    2 for one process in 16 of split.py's two threads.)  The first
    samples also read the threads' names and line tables: 1,500 reads are
    allowed for that, and a quarter of a read a sample for stacks read
    again, whatever the rate the machine gives."""
    t = Target(python, "parked.py", workdir, expect_threads=False)

    def attempt(k):  # (longer runs until one has 100 samples: a loaded
        #             machine may serve fewer a second)
        r = sample(t.pid, "-d", longer(1, k), "--verbose", "--format",
                   "collapsed")
        samples = int(re.search(r"(\d+) samples in", r.stderr).group(1))
        reads = int(re.search(r"(\d+) reads \(", r.stderr).group(1))
        seen = set(int(tid) for tid in collapsed(r.stdout))
        assert seen == set(t.truth["native_ids"]), (seen, t.truth)
        if samples < 100:  # (so a read per thread would show)
            return False
        assert reads < 2.25 * samples + 1500, r.stderr
        return True
    try:
        until_shown(attempt)
    finally:
        t.close()


def test_json_and_top(workdir):
    python = (PY315 or PYTHONS)[0][1]
    t = split_target(python, workdir)
    try:
        r = sample(t.pid, "-d", "1", "--format", "json")
        p = json.loads(r.stdout)
        assert p["pid"] == t.pid and p["mode"] == "wall"
        assert p["total"] == sum(s["count"] for s in p["stacks"])
        assert p["samples"] >= max(th["samples"] for th in p["threads"])
        names = {f["name"] for f in p["functions"]}
        assert {"three", "one", "busy", "sleeper"} <= names
        for s in p["stacks"]:
            for fr in s["frames"]:
                func = p["functions"][p["frames"][fr]["function"]]
                assert func["kind"] in ("python", "gc", "native")
        main = [th for th in p["threads"]
                if th["native_thread_id"] == t.truth["roles"]["main"]][0]
        assert main["main"] is True
        assert main["status"]["has_gil"] > main["samples"] / 2
        r = sample(t.pid, "-d", "1", "--sort", "total", "--limit", "3")
        rows = [l for l in r.stdout.splitlines()
                if re.match(r"^ *\d+ +\d+\.\d+% ", l)]
        assert len(rows) == 3
        assert "samples in" in r.stdout.splitlines()[0]
    finally:
        t.close()


def test_thread_filter(workdir):
    python = (PY315 or PYTHONS)[0][1]
    t = split_target(python, workdir)
    try:
        tid = t.truth["roles"]["sleeper"]
        got = collapsed(sample(t.pid, "-d", "0.5", "--thread", str(tid),
                               "--format", "collapsed").stdout)
        assert set(got) == {tid}
    finally:
        t.close()


@pytest.mark.parametrize("label,python", PY315[:1],
                         ids=[p[0] for p in PY315[:1]])
def test_native_frames_where_c_calls_python(label, python, workdir):
    """--native: "<native>" where C code called into Python (sorted()
    calling its key function, the interpreter's entry), as CPython's
    sampler --native shows them."""
    t = split_target(python, workdir, "--native")
    try:
        out = os.path.join(workdir, "tachyon.txt")
        r = subprocess.run([python, "-m", "profiling.sampling", "attach",
                            "-a", "--native", "-d", "1", "--collapsed",
                            "-o", out, str(t.pid)], capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        with open(out, encoding="utf-8") as f:
            theirs = collapsed(f.read())
        ours = collapsed(sample(t.pid, "-d", "1.5", "--native", "--format",
                                "collapsed").stdout)
        main = t.truth["roles"]["main"]
        via_c = [f for f, _ in ours[main] if calls(f, "key_calls_one")]
        assert via_c
        for frames in via_c:  # main -> sorted (C) -> key_calls_one
            i = [k for k, f in enumerate(frames)
                 if f.split(":")[1:2] == ["key_calls_one"]][0]
            assert frames[i - 1] == "<native>", frames
            assert frames[i - 2].split(":")[1] == "main", frames
        # the stacks each reader saw most are the same (by function: the
        # lines of busy() split each about 3:1, so that `three` at one line
        # and the call through sorted() at the other weigh about the same)
        def top(st):
            by = collections.Counter()
            for f, n in st:
                by[";".join(x.split(":")[1] if ":" in x else x
                            for x in f)] += n
            return {s for s, _ in by.most_common(2)}
        for tid in (main, t.truth["roles"]["sleeper"]):
            assert top(ours[tid]) == top(theirs[tid]), (ours[tid][:3],
                                                        theirs[tid][:3])
        plain = collapsed(sample(t.pid, "-d", "0.5", "--format",
                                 "collapsed").stdout)
        assert all("<native>" not in f for st in plain.values()
                   for f, _ in st)
    finally:
        t.close()


@pytest.mark.parametrize("label,python", PY315[:1],
                         ids=[p[0] for p in PY315[:1]])
def test_gc_frames(label, python, workdir):
    t = split_target(python, workdir, "--gc")
    try:
        got = collapsed(sample(t.pid, "-d", "2", "--gc", "--format",
                               "collapsed").stdout)
        stacks = got[t.truth["roles"]["gc"]]
        gc = [f for f, _ in stacks if f and f[-1] == "<GC>"]
        assert gc, stacks[:5]
        assert all(calls(f, "collector") for f in gc)
        assert all("<GC>" not in f for f, _ in got[t.truth["roles"]["main"]])
    finally:
        t.close()


def test_bad_options():
    for args, text in ((["-r", "fast", "1"], "not a rate"),
                       (["--mode", "idle", "1"], "not a mode"),
                       (["--format", "svg", "1"], "not a format"),
                       (["-d", "-1", "1"], "not a duration"),
                       (["--async", "--native", "1"], "do not go together"),
                       ([], "give a process id")):
        r = pyunwind("sample", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert text in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = pyunwind("sample", "-d", "1", "999999999")
    assert r.returncode in (2, 3) and r.stderr.count("\n") == 1


def test_target_in_a_pid_namespace(workdir):
    """A target in a pid namespace of its own (a container): its memory
    holds that namespace's thread ids.  From here, by its pid here: the
    dump is the target's own truth, the cpu mode finds the busy main
    thread on a CPU and leaves the sleeper out (the thread ids translated
    for /proc), and the thread names are found; from inside the namespace
    (nsenter), by its pid there: the same dump."""
    import json
    python = labelled(PYTHONS, "3.15.2-debian")
    truth_path = os.path.join(workdir, "truth.json")
    p = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
         python, os.path.join(ROOT, "tests", "targets", "split.py"),
         truth_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        with open(truth_path) as f:
            truth = json.load(f)
        host = int(subprocess.run(["pgrep", "-f", "-P", str(p.pid),
                                   "split.py"], capture_output=True,
                                  text=True).stdout.split()[0])
        with open("/proc/%d/status" % host) as f:
            nspid = [line.split()[1:] for line in f
                     if line.startswith("NSpid:")][0]
        assert len(nspid) == 2 and int(nspid[0]) == host, nspid
        inner = int(nspid[1])
        roles = truth["roles"]
        dump = json.loads(pyunwind("dump", "--json", str(host)).stdout)
        natives = {t["native_thread_id"] for t in dump["threads"]}
        assert natives == {roles["main"], roles["sleeper"]}, natives
        on_cpu = 0

        def attempt(_):  # (runs of 1 s until the main thread has 100)
            nonlocal on_cpu
            r = sample(host, "-d", "1", "--mode", "cpu", "--format", "json")
            prof = json.loads(r.stdout)
            threads = {t["native_thread_id"]: t for t in prof["threads"]}
            # (the dump just before stopped the sleeper too: its sleep,
            # restarted on the detach, may find it runnable in a sample or
            # two)
            assert roles["main"] in threads, threads
            assert all(th["samples"] <= 3 for tid, th in threads.items()
                       if tid != roles["main"]), threads
            main = threads[roles["main"]]
            assert main["status"]["on_cpu"] == main["samples"], main
            on_cpu += main["samples"]
            return on_cpu > 100
        until_shown(attempt)
        r = sample(host, "-d", "0.3", "--format", "json")
        names = {t["native_thread_id"]: t["name"]
                 for t in json.loads(r.stdout)["threads"]}
        assert names[roles["sleeper"]] == "sleeper", names
        r = subprocess.run(["nsenter", "--target", str(host), "--pid",
                            "--mount", PYUNWIND, "dump", "--json",
                            str(inner)], capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        inside = json.loads(r.stdout)
        assert inside["pid"] == inner
        # (the main thread is busy: its stack moves; the sleeper's not)
        assert {t["native_thread_id"] for t in inside["threads"]} == natives
        sleeper = [[t["frames"] for t in d["threads"]
                    if t["native_thread_id"] == roles["sleeper"]]
                   for d in (inside, dump)]
        assert sleeper[0] == sleeper[1] and sleeper[0], sleeper
    finally:
        p.kill()
        p.wait()


CFRAMES = [p for p in PYTHONS if p[0] in ("3.11.2-debian",
                                          "3.12.1-pyenv-stripped")]


@pytest.mark.parametrize("label,python", CFRAMES,
                         ids=[p[0] for p in CFRAMES])
def test_no_stack_without_its_frames(label, python):
    """3.11 and 3.12 name a thread's frames through its eval loop's
    _PyCFrame.  Read from a running thread whose key functions C code
    calls (workloads.py sorting), the word could name no frame (read as a
    loop began, or after a callback's loop had ended) and a walk could be
    of entry frames alone: such a sample once came out as the thread with
    no frames, 0.1-0.2 % of them, not counted as failed.  Every stack has
    its frames, or <unknown> and counts as failed."""
    # (the target on the first CPU, the sampler on the last, as
    # bench/accuracy-run has them: where it was seen)
    cpus = sorted(os.sched_getaffinity(0))
    w = subprocess.Popen(["taskset", "-c", str(cpus[0]), python,
                          os.path.join(TARGETS, "workloads.py"), "sorting"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert w.stdout.readline().strip() == "ready"
        r = subprocess.run(["taskset", "-c", str(cpus[-1]), PYUNWIND,
                            "sample", "--other-cpu", "-r", "1000", "-d", "4",
                            "--format", "collapsed", str(w.pid)],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        stacks = collapsed(r.stdout)[w.pid]
        assert stacks and all(frames for frames, _ in stacks), \
            [s for s in stacks if not s[0]]
        unknown = count(stacks, lambda f: "<unknown>" in f)
        failed = int(re.search(r"(\d+) failed", r.stderr).group(1))
        assert failed >= unknown, (failed, unknown, r.stderr)
    finally:
        w.kill()
        w.wait()
