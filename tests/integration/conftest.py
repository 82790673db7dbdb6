"""Shared helpers of the integration tests: the interpreters, the pyunwind
binary, starting targets, and comparing dumps with the target's own truth."""

import contextlib
import ctypes
import json
import math
import os
import re
import resource
import select
import signal
import subprocess
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = os.path.join(ROOT, "tests", "targets")
PYUNWIND = os.environ.get("PYUNWIND", os.path.join(ROOT, "build", "pyunwind"))
TIMEOUT = 120
# How long a test waits for a state or for enough of something (samples,
# threads, a process sleeping) before it fails: a loaded machine, or the
# ASan build, takes its time, but a state that never comes fails the test.
DEADLINE = 240
# What /proc/PID/stat says of a process that is not stopped: running,
# sleeping, or in a short uninterruptible wait ("D": on I/O, or on its own
# memory map's lock while a reader holds it). "T" and "t" are stopped.
RUNNING = "RSD"


def pytest_configure(config):
    config.addinivalue_line("markers", "debugger: drives gdb or lldb with "
                            "the plugins (release build only)")
    config.addinivalue_line("markers", "accuracy: a profile's shares against "
                            "the truth, or what the sampler's speed gives "
                            "(release build only: ASan's slower reads are "
                            "not what is claimed)")
    config.addinivalue_line("markers", "sanitized: for the ASan+UBSan build "
                            "(scripts/test leaves it out of the release "
                            "run, whose accuracy tests read the same "
                            "targets)")
    config.addinivalue_line("markers", "kinds: runs on one interpreter of "
                            "each kind (conftest.KINDS), not on every one")
    config.addinivalue_line("markers", "builds: also runs on the other "
                            "builds of a version (conftest.OTHER_BUILDS)")
    config.addinivalue_line("markers", "release: reads what the release "
                            "build makes (the package, the demo), whatever "
                            "the build under test, or holds a bound sized "
                            "for the release build's speed")


# One interpreter of each way pyunwind reads them: 3.9's frame objects
# and co_lnotab (Debian 11's: stripped, the runtime in a non-PIE
# executable), 3.10's line table (a stripped copy of pyenv's: libpython,
# PIE), 3.11's built-in layout
# (Debian's: stripped, the runtime in a non-PIE executable), 3.12's (a
# stripped copy of pyenv's: the runtime in libpython, PIE), 3.13 from a
# shared libpython (a stripped copy of pyenv's), 3.13 and 3.14
# free-threaded (built from source), Debian's stripped 3.15 with its
# anchors.  A debug build, or another build of a version, takes
# the code paths of the one beside it.  PYU_ONLY=kinds keeps only these
# (scripts/test's sanitized run); a test marked `kinds` runs on these only.
KINDS = (r"3\.9\.\d+-bullseye", r"3\.10\.\d+-pyenv-stripped",
         r"3\.11\.\d+-debian", r"3\.12\.\d+-pyenv-stripped",
         r"3\.13\.\d+-pyenv-stripped", r"3\.13\.\d+t",
         r"3\.14\.\d+t", r"3\.15\.\d+-debian")


def of_a_kind(label):
    return any(re.fullmatch(k, label) for k in KINDS)


# Other builds of a version the matrix has: pyenv's own builds (their
# stripped copies stand for them: the same code, without symbols; 3.9's
# distribution build is Debian 11's) and Debian 11's debug build.  A test
# runs on these only when marked `builds`: the tests that compare a dump
# with the target's own record (live, cores, debuggers), which must hold
# on every build.
OTHER_BUILDS = (r"3\.\d+\.\d+-pyenv", r"3\.9\.\d+-pyenv-stripped",
                r"3\.9\.\d+-bullseye-dbg")


def another_build(label):
    return any(re.fullmatch(k, label) for k in OTHER_BUILDS)


# scripts/test runs the ASan+UBSan build's tests on one interpreter of each
# kind and, at the same time, the release build's on everything else: with
# PYU_AFTER_ASAN set, a run leaves out the runs on those interpreters of the
# tests the sanitized run takes (not `debugger`, `accuracy` or `release`).
# Tests that choose their interpreters themselves run in both.
AFTER_ASAN = bool(os.environ.get("PYU_AFTER_ASAN"))


def taken_by_asan(item, label):
    return AFTER_ASAN and of_a_kind(label) and not any(
        item.get_closest_marker(m)
        for m in ("debugger", "accuracy", "release", "sanitized"))


def pytest_collection_modifyitems(config, items):
    """Deselects the `kinds` tests' runs on the other interpreters, every
    test's runs on the other builds but the `builds` tests' (their
    interpreter: a (label, path) parameter, or `label`), and with
    PYU_AFTER_ASAN the runs the sanitized run takes."""
    keep, drop = [], []
    for item in items:
        label = None
        if hasattr(item, "callspec"):
            for v in item.callspec.params.values():
                if isinstance(v, tuple) and len(v) == 2 and \
                        isinstance(v[0], str):
                    label = v[0]
            label = item.callspec.params.get("label", label)
        if not isinstance(label, str):
            label = None
        out = label and (
            (item.get_closest_marker("kinds") and not of_a_kind(label)) or
            (another_build(label) and not item.get_closest_marker("builds"))
            or taken_by_asan(item, label))
        (drop if out else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


_INSTALLED = []


def installed():
    """(label, path) of every interpreter scripts/get-pythons installed
    (asked once a run)."""
    if not _INSTALLED:
        out = subprocess.run(
            [os.path.join(ROOT, "scripts", "get-pythons"), "--list"],
            capture_output=True, text=True, check=True).stdout
        _INSTALLED.extend(tuple(line.split(" ", 1))
                          for line in out.splitlines() if line.strip())
    return list(_INSTALLED)


# The parts the matrix's builds of 3.13 and 3.14 play, whatever their patch
# release: the plain ones (GIL, the runtime in a non-PIE executable,
# stripped) are Debian's own binaries, the free-threaded ones are built
# from source (PIE, with symbols), and 3.13 with a shared libpython is a
# stripped copy of pyenv's.  A test names the part: matrix("3.14t").
MATRIX = {"3.13": r"3\.13\.\d+-debian", "3.13t": r"3\.13\.\d+t",
          "3.13-shared": r"3\.13\.\d+-pyenv-stripped",
          "3.14": r"3\.14\.\d+-debian", "3.14t": r"3\.14\.\d+t"}


def matrix(part):
    """The label of the interpreter that plays `part` (MATRIX), or, when
    none is installed, a label no interpreter has (its tests then skip)."""
    for label, _ in installed():
        if re.fullmatch(MATRIX[part], label):
            return label
    return "(no %s build installed)" % part


def python_version(python):
    """The version an interpreter says it is ("3.14.10")."""
    return subprocess.run([python, "-c", "import platform; print(platform."
                           "python_version())"], capture_output=True,
                          text=True, check=True).stdout.strip()


def interpreters():
    """(label, path) of every interpreter scripts/get-pythons installed."""
    pys = installed()
    only = os.environ.get("PYU_ONLY")  # e.g. "3.15.2-debian,3.13.0-pyenv"
    if only == "kinds":
        return [p for p in pys if of_a_kind(p[0])]
    if only:
        pys = [p for p in pys if p[0] in only.split(",")]
    return pys


def py315(pythons):
    """The stripped 3.15 interpreter among pythons (interpreters()); skips
    the test when PYU_ONLY left none."""
    for label, path in pythons:
        if label.startswith("3.15") and not label.endswith("-dbg"):
            return path
    pytest.skip("no CPython 3.15 among the selected interpreters (PYU_ONLY)")


def labelled(pythons, *labels):
    """The path of the first of labels among pythons (a second label: a
    build of the version that stands for the first); skips the test when
    PYU_ONLY left none of them."""
    for label in labels:
        for lab, path in pythons:
            if lab == label:
                return path
    pytest.skip("no %s among the selected interpreters (PYU_ONLY)"
                % " or ".join(labels))


def pyunwind(*args, timeout=TIMEOUT, **kw):
    """Runs the CLI; returns the CompletedProcess (text mode)."""
    return subprocess.run([PYUNWIND, *args], capture_output=True, text=True,
                          timeout=timeout, **kw)


def allow_core():
    """In the child before exec: allow core files, and die with the test
    runner (PR_SET_PDEATHSIG) so no busy target outlives it."""
    resource.setrlimit(resource.RLIMIT_CORE,
                       (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)


class Target:
    """A target program started in its own directory, ready to be read."""

    def __init__(self, python, script, workdir, args=(), expect_threads=True):
        self.workdir = workdir
        self.truth_path = os.path.join(workdir, "truth.json")
        self.proc = subprocess.Popen(
            [python, os.path.join(TARGETS, script), self.truth_path, *args],
            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, preexec_fn=allow_core)
        # (a target that fails before its "ready" may live on, its
        # threads waited for: the wait for the line has a deadline)
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.close()
            raise RuntimeError("target did not start: %r %s"
                               % (line, self.proc.stderr.read()))
        with open(self.truth_path, encoding="utf-8") as f:
            self.truth = json.load(f)
        if expect_threads:  # the recorder threads have ended
            try:
                self._wait_threads(len({t["native_id"] for t in
                                        self.truth["threads"].values()}))
            except Exception:
                self.close()
                raise

    @property
    def pid(self):
        return self.proc.pid

    def _wait_threads(self, n):
        wait_threads(self.pid, n)

    def gcore(self):
        prefix = os.path.join(self.workdir, "gcore")
        r = subprocess.run(["gcore", "-o", prefix, str(self.pid)],
                           capture_output=True, text=True, timeout=TIMEOUT)
        path = "%s.%d" % (prefix, self.pid)
        assert r.returncode == 0 and os.path.exists(path), r.stderr
        return path

    def abort(self):
        """SIGABRT: the kernel writes a core (default coredump_filter)."""
        os.kill(self.pid, signal.SIGABRT)
        self.proc.wait(timeout=TIMEOUT)
        for name in ("core", "core.%d" % self.pid):
            path = os.path.join(self.workdir, name)
            if os.path.exists(path):
                return path
        return None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_threads(pid, n):
    """Until process pid has n threads (a target's recorder threads have
    ended); RuntimeError after DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if len(os.listdir("/proc/%d/task" % pid)) == n:
            return
        time.sleep(0.05)
    raise RuntimeError("target has %d tasks, expected %d"
                       % (len(os.listdir("/proc/%d/task" % pid)), n))


def wait_until(condition, what, deadline=DEADLINE):
    """Polls condition() until it is true; fails the test after deadline
    seconds.  For a state a test must see before it goes on (a process
    stopped, asleep, running again): a fixed sleep is too short on a
    loaded machine."""
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "waited %d s for %s" % (deadline, what)
        time.sleep(0.02)


def until_shown(attempt, deadline=DEADLINE):
    """attempt(k) for k = 0, 1, 2... until it returns something true, which
    is returned.  A run that a loaded machine (or the ASan build) may starve
    of samples is run again, longer each time if attempt makes it so, until
    it has shown what the test judges; each attempt asserts what must hold
    of every run.  After deadline seconds the test fails."""
    end = time.monotonic() + deadline
    k = 0
    while True:
        got = attempt(k)
        if got:
            return got
        assert time.monotonic() < end, \
            "still not shown after %d attempts in %d s" % (k + 1, deadline)
        k += 1


def longer(seconds, k):
    """The duration of attempt k of a run of `seconds` (until_shown):
    twice as long each time, at most eight times."""
    return "%g" % (float(seconds) * 2 ** min(k, 3))


# A share of samples is held to a tolerance only on enough samples that
# chance alone puts a right profile past it less than once in 10,000
# runs.  A sample (at a random point of its tick, of a target whose loop
# drifts against the schedule) finds a function that holds a share p of
# the time with probability p, so the share of n independent samples has
# a standard deviation of sqrt(p (1 - p) / n); Z = 4.4 of them on either
# side hold all but 1.1e-5 of it (the normal tail), which leaves room for
# the several such bounds one test may hold: 1 in 10,000 for all of them
# together.  The samples of a loaded machine are not independent: while a
# thread waits for a CPU, every tick finds it in the same function.  The
# spread of split.py's 3:1 split over 1,000 samples was 0.6-1.0 times the
# independent samples' on an idle machine and 1.0-2.05 times with two
# busy processes on its two CPUs (30-40 runs each), so a share of the
# clock's time is judged on DESIGN = 4 times the samples (twice the
# spread); a share held to the time the target measured itself over the
# same runs (workers.py, prefork.py) waits on the CPU in both, and needs
# no more than the independent samples' (design=1).
Z = 4.4
DESIGN = 4


def samples_for(tolerance, p=0.75, pairs=1, design=DESIGN):
    """The samples that put a share p within tolerance of the truth but
    for a chance of 1.1e-5 (Z, DESIGN); pairs=2: the difference of two
    such shares (two profiles of this many samples each)."""
    return math.ceil(design * pairs * p * (1 - p) * (Z / tolerance) ** 2)


STATUS = re.compile(r"pyunwind: sampling [\d.]+(?:/[\d.]+)? s, (\d+) samples")


class Sampling:
    """`pyunwind sample ARGS` in the background, its standard error on a
    terminal (a pty), where it rewrites a status line with the samples
    taken so far (every 0.25 s).  A test that acts in the middle of a run
    (interrupts it, ends or changes the target) waits for the samples it
    needs, not for a time: a loaded machine or the ASan build may take
    any time to start and to sample."""

    def __init__(self, *args, stdout=subprocess.PIPE):
        import pty
        self._master, slave = pty.openpty()
        try:
            self.proc = subprocess.Popen(
                [PYUNWIND, "sample", *args], stdin=subprocess.DEVNULL,
                stdout=stdout, stderr=slave, text=True, errors="replace")
        finally:
            os.close(slave)
        self._err = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # (EIO: the terminal closed with the process)
                break
            if not chunk:
                break
            with self._lock:
                self._err += chunk

    def err(self):
        with self._lock:
            return self._err.decode("utf-8", "replace")

    def samples(self):
        """The samples its last status line counted (0 before the
        first)."""
        found = STATUS.findall(self.err())
        return int(found[-1]) if found else 0

    def wait_for(self, samples, deadline=DEADLINE):
        """Until the run has taken this many samples; fails the test if it
        ends first or takes more than deadline seconds."""
        end = time.monotonic() + deadline
        while self.samples() < samples:
            assert self.proc.poll() is None, \
                "the run ended first: %s" % self.err()[-2000:]
            assert time.monotonic() < end, \
                "%d samples of %d after %d s" % (self.samples(), samples,
                                                  deadline)
            time.sleep(0.05)

    def finish(self, sig=None, timeout=TIMEOUT):
        """Sends sig (if any) and waits for the run to end: (its exit
        status, its standard output, its standard error)."""
        if sig is not None:
            self.proc.send_signal(sig)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        finally:
            self.close()
        return self.proc.returncode, out, self.err()

    def close(self):
        """Ends the run if it still runs (a test that failed midway)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self._master is not None:
            self._reader.join(10)
            os.close(self._master)
            self._master = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class OnPty:
    """A program on a terminal of its own (a pty), what it draws read as
    it comes.  A test of a live view waits for the view a key changes
    before it presses the next, as a person would, rather than for a time
    that a loaded machine may not keep."""

    def __init__(self, argv):
        import pty
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.seen = b""

    def views(self):
        """What it drew, a screen per clear (ESC [H ESC [2J)."""
        return self.seen.decode("utf-8", "replace").split(
            "\x1b[H\x1b[2J")[1:]

    def read(self, seconds=0.05):
        """Adds what it wrote within seconds to seen; False once the
        terminal is closed (the program ended)."""
        import select
        if select.select([self.fd], [], [], seconds)[0]:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return False
            if not chunk:
                return False
            self.seen += chunk
        return True

    def wait_for(self, condition, what, deadline=DEADLINE):
        """Reads until condition(views()) holds; fails the test if the
        program ends first or deadline seconds pass."""
        end = time.monotonic() + deadline
        while not condition(self.views()):
            assert time.monotonic() < end, "%s: not drawn in %d s: %r" % (
                what, deadline, self.seen[-2000:])
            assert self.read(), "%s: the program ended first: %r" % (
                what, self.seen[-2000:])

    def key(self, k):
        os.write(self.fd, k)

    def end(self, deadline=DEADLINE):
        """Reads to the end of what it writes; its wait status."""
        end = time.monotonic() + deadline
        while self.read():
            assert time.monotonic() < end, "still running after %d s: %r" % (
                deadline, self.seen[-2000:])
        return os.waitpid(self.pid, 0)[1]

    def close(self):
        try:
            if os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass  # (end() collected it)
        os.close(self.fd)


def python_claiming(version_hex, directory):
    """A copy of Debian 12's /usr/bin/python3.11 whose Py_Version (the
    version a reader without debug offsets goes by) says version_hex: a
    runtime of a version pyunwind does not read.  Skips when there is no
    /usr/bin/python3.11."""
    src = "/usr/bin/python3.11"
    if not os.path.exists(src):
        pytest.skip("/usr/bin/python3.11 is not installed")
    syms = subprocess.run(["readelf", "-sW", "--dyn-syms", src],
                          capture_output=True, text=True, check=True).stdout
    vaddr, = {int(f[1], 16) for f in (line.split() for line in
                                      syms.splitlines())
              if len(f) >= 8 and f[7] == "Py_Version"}
    secs = subprocess.run(["readelf", "-SW", src], capture_output=True,
                          text=True, check=True).stdout
    for line in secs.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 5 and f[0].startswith("[") and f[2] == "PROGBITS":
            addr, off, size = (int(x, 16) for x in f[3:6])
            if addr <= vaddr < addr + size:
                at = off + vaddr - addr
                break
    else:
        raise AssertionError("no section holds Py_Version")
    with open(src, "rb") as f:
        data = bytearray(f.read())
    assert data[at:at + 8] == (0x030b02f0).to_bytes(8, "little")
    data[at:at + 8] = version_hex.to_bytes(8, "little")
    path = os.path.join(str(directory), "python3.11")
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o755)
    return path


@contextlib.contextmanager
def sleeping(python):
    """A process of `python` sleeping in time.sleep, once it has started."""
    p = subprocess.Popen([python, "-c", "import time; print('ready', "
                          "flush=True); time.sleep(300)"],
                         stdout=subprocess.PIPE, text=True)
    try:
        p.stdout.readline()
        yield p
    finally:
        p.kill()
        p.wait()


@contextlib.contextmanager
def traced_by_strace(pid):
    """strace attached to process pid (ptrace allows one tracer) for the
    duration; yields the strace process."""
    tracer = subprocess.Popen(["strace", "-f", "-o", "/dev/null", "-p",
                               str(pid)], stderr=subprocess.DEVNULL)
    try:
        def traced():
            with open("/proc/%d/status" % pid) as f:
                return "TracerPid:\t%d\n" % tracer.pid in f.read()
        wait_until(traced, "strace to attach to %d" % pid)
        yield tracer
    finally:
        tracer.kill()
        tracer.wait()


def kernel_cores_land_here():
    try:
        with open("/proc/sys/kernel/core_pattern") as f:
            pattern = f.read().strip()
    except OSError:
        return False
    return not pattern.startswith("|") and "/" not in pattern


def frames_of(thread):
    return [{k: f[k] for k in ("function", "name", "file", "line")}
            for f in thread["frames"]]


def assert_matches_truth(dump, truth, names=True):
    """Every thread of the dump equals what the target recorded itself.
    names: threading's names too -- which a dump reads through the type
    objects of the interpreter binary's data (str, dict): a kernel core
    read without the binary (gone, or the memory lldb's own reader gives
    of a kernel core, which leaves the file's pages out) has none."""
    got = {"%d:%d" % (t["interpreter_id"], t["thread_id"]): t
           for t in dump["threads"]}
    want = truth["threads"]
    assert sorted(got) == sorted(want), (
        "threads differ: only in dump %s, only in truth %s"
        % (sorted(set(got) - set(want)), sorted(set(want) - set(got))))
    for ident, w in want.items():
        g = got[ident]
        assert g["error"] is None, g["error"]
        assert g["truncated"] is False
        assert g["native_thread_id"] == w["native_id"], ident
        # threading's name, as the thread had it
        assert g["name"] == (w["name"] if names else None), (
            ident, g["name"], w["name"])
        if ident.startswith("0:"):  # main thread of the main interpreter
            assert g["main"] == (ident == "0:%d" % truth["main_ident"]), ident
        gf, wf = frames_of(g), w["frames"]
        if gf != wf:
            for i, (a, b) in enumerate(zip(gf, wf)):
                assert a == b, "thread %s frame %d: dump %r, truth %r" % (
                    ident, i, a, b)
            assert len(gf) == len(wf), "thread %s: %d frames, truth %d" % (
                ident, len(gf), len(wf))
    assert dump["python"]["version"] == truth["version"]


def has_guard_regions(pid):
    """glibc 2.42+ guards thread stacks with MADV_GUARD_INSTALL (smaps flag
    "gu"); gdb 13's gcore then writes zeros for whole chunks around them."""
    with open("/proc/%d/smaps" % pid) as f:
        return any(line.startswith("VmFlags:") and " gu" in line for line in f)


def assert_prefix_of_truth(dump, truth):
    """For gcore dumps of guarded targets: memory gdb could not copy reads
    as zeros, so a thread whose frame chain crosses it must end with an
    error after a correct prefix; the main thread is complete."""
    want = truth["threads"]
    for t in dump["threads"]:
        frames = frames_of(t)
        expect = want["%d:%d" % (t["interpreter_id"], t["thread_id"])]["frames"]
        if t["error"] is None:
            assert frames == expect
        else:
            assert frames == expect[:len(frames)], t["error"]
    main = [t for t in dump["threads"]
            if t["main"] and t["interpreter_id"] == 0]
    assert main and main[0]["error"] is None


def dump_json(*args):
    r = pyunwind("dump", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def workdir(tmp_path):
    return str(tmp_path)
