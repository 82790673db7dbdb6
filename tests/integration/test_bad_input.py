"""Bad input ends in a one-line error and a non-zero exit, never a crash or
a hang: missing and foreign processes, old Pythons, refused permissions,
and files that are not (whole) cores of a Python program."""

import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import (PYUNWIND, ROOT, TIMEOUT, Target, allow_core,
                      assert_matches_truth, interpreters,
                      kernel_cores_land_here, pyunwind, python_claiming,
                      sleeping, traced_by_strace, py315, until_shown,
                      wait_until)

SANITIZER_MARKS = ("AddressSanitizer", "runtime error:", "LeakSanitizer")


def assert_one_line_error(r, code, *words):
    assert r.returncode == code, (r.returncode, r.stdout[-500:], r.stderr)
    err = r.stderr.strip()
    assert err.startswith("pyunwind: error: "), err
    assert "\n" not in err, err
    for w in words:
        assert w in err, err


def assert_no_crash(r):
    """Any clean outcome is fine; a signal, a sanitizer report or an
    unreadable message is not."""
    assert r.returncode in (0, 3, 4, 5), (r.returncode, r.stderr[-2000:])
    assert not any(m in r.stderr for m in SANITIZER_MARKS), r.stderr[-3000:]
    if r.returncode in (3, 4):
        assert r.stderr.startswith("pyunwind: error: ")
        assert r.stderr.count("\n") == 1, r.stderr
    else:
        assert r.stdout.startswith("Process") or r.stdout.startswith("CPython")


# ------------------------------------------------------------ processes

def test_usage_errors():
    assert pyunwind().returncode == 2
    assert pyunwind("dump").returncode == 2
    assert_one_line_error(pyunwind("dump", "abc"), 2, "not a process id")
    # a file in a PID's place: pointed to --core (dump, tasks), which
    # sample does not have
    here = os.path.abspath(__file__)
    for cmd in ("dump", "tasks"):
        assert_one_line_error(
            pyunwind(cmd, here), 2, "'%s' is not a process id: to read it "
            "as a core file, pyunwind %s --core %s" % (here, cmd, here))
    r = pyunwind("sample", here)
    assert_one_line_error(r, 2, "'%s' is not a process id" % here)
    assert "--core" not in r.stderr
    assert_one_line_error(pyunwind("dump", "--core", "x", "123"), 2)
    assert pyunwind("frobnicate").returncode == 2
    assert pyunwind("dump", "--help").returncode == 0
    assert_one_line_error(pyunwind("dump", "--frob", "1"), 2,
                          "unknown option '--frob'")
    assert_one_line_error(pyunwind("dump", "-o"), 2, "needs a value")
    assert_one_line_error(pyunwind("dump"), 2, "give a process id")


def test_help_names_every_exit_code():
    """`pyunwind --help` says what each exit code means: the same codes
    as docs/exit-codes.md's table, no more and no fewer."""
    with open(os.path.join(ROOT, "docs", "exit-codes.md"),
              encoding="utf-8") as f:
        documented = {int(m.group(1)) for m in
                      re.finditer(r"^\| (\d+) \|", f.read(), re.M)}
    r = pyunwind("--help")
    assert r.returncode == 0, r.stderr
    said = r.stdout.partition("Exit codes:")[2]
    assert said, r.stdout
    codes = re.findall(r"(?:^\s*|; )(\d+) ", said, re.M)
    assert {int(c) for c in codes} == documented, (said, documented)


def free_pid():
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    for pid in range(pid_max - 1, 1, -1):
        if not os.path.exists("/proc/%d" % pid):
            return pid
    pytest.skip("no free pid")


def test_no_such_process():
    assert_one_line_error(pyunwind("dump", str(free_pid())), 3,
                          "no process with id")


def test_exited_process_not_yet_collected():
    """A zombie has no memory to read: it says it has exited."""
    p = subprocess.Popen(["true"])
    try:
        wait_until(lambda: state(p.pid) == "Z", "true to exit")
        assert_one_line_error(pyunwind("dump", str(p.pid)), 3,
                              "process %d has exited" % p.pid)
    finally:
        p.wait()


def state(pid, tid=None):
    """The state letter /proc gives process pid (or its thread tid)."""
    path = "/proc/%d/stat" % pid if tid is None else \
        "/proc/%d/task/%s/stat" % (pid, tid)
    with open(path) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def states(pid):
    """{thread id: state letter} of every thread of process pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            out[tid] = state(pid, tid)
        except OSError:
            pass  # (a thread that ended)
    return out


@pytest.fixture
def sleeper():
    p = subprocess.Popen(["sleep", "300"])
    time.sleep(0.1)
    yield p
    p.kill()
    p.wait()


def test_not_python(sleeper):
    assert_one_line_error(pyunwind("dump", str(sleeper.pid)), 4,
                          "no CPython runtime found")


def test_version_not_read(tmp_path):
    """A runtime whose Py_Version says 3.8.18 (a version not read):
    refused in one line naming the versions read, not read as the 3.11
    it is shaped like."""
    with sleeping(python_claiming(0x030812f0, tmp_path)) as p:
        assert_one_line_error(pyunwind("dump", str(p.pid)), 4,
                              "CPython 3.8.18 is not a version pyunwind "
                              "reads; it reads CPython 3.9-3.15")


def test_permission_denied():
    if os.geteuid() != 0:
        pytest.skip("needs root to run the target and pyunwind as two users")
    label, python = interpreters()[0]
    p = subprocess.Popen([python, "-c", "import time; print('ready', "
                          "flush=True); time.sleep(300)"],
                         stdout=subprocess.PIPE, text=True)
    try:
        p.stdout.readline()
        r = subprocess.run([PYUNWIND, "dump", str(p.pid)], capture_output=True,
                           text=True, timeout=60,
                           preexec_fn=lambda: (os.setgid(65534),
                                               os.setuid(65534)))
        assert_one_line_error(r, 3, "permission denied", "ptrace_scope",
                              "CAP_SYS_PTRACE", "setcap cap_sys_ptrace+ep",
                              "--cap-add SYS_PTRACE")
    finally:
        p.kill()
        p.wait()


def test_process_left_running(tmp_path):
    """The dump stops the target only while reading it."""
    label, python = interpreters()[0]
    t = Target(python, "stacks.py", str(tmp_path), ["--threads", "3",
                                                     "--depth", "5"])
    try:
        assert pyunwind("dump", str(t.pid)).returncode == 0
        for tid in os.listdir("/proc/%d/task" % t.pid):
            with open("/proc/%d/task/%s/stat" % (t.pid, tid)) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            assert state in ("S", "R"), (tid, state)
        with open("/proc/%d/status" % t.pid) as f:
            assert "TracerPid:\t0\n" in f.read()
    finally:
        t.close()


@pytest.mark.parametrize("label,python", interpreters()[:3],
                         ids=[p[0] for p in interpreters()[:3]])
def test_changing_target(label, python):
    """Stacks, code objects and threads change all the time: reads that do
    not stop the process see torn state.  Every read ends in a dump (maybe
    with incomplete stacks after retries) or a one-line error."""
    from conftest import TARGETS
    p = subprocess.Popen([python, os.path.join(TARGETS, "churn.py")],
                         stdout=subprocess.PIPE, text=True,
                         preexec_fn=allow_core)
    try:
        assert p.stdout.readline().strip() == "ready"
        outcomes = {}
        for i in range(40):
            args = ["dump", "--no-source", str(p.pid)]
            if i % 2:
                args.insert(1, "--nonblocking")
            r = pyunwind(*args, timeout=60)
            assert_no_crash(r)
            outcomes[r.returncode] = outcomes.get(r.returncode, 0) + 1
        # stopped reads see one consistent instant
        assert outcomes.get(0, 0) >= 20, outcomes
    finally:
        p.kill()
        p.wait()


@contextlib.contextmanager
def sleeping_in_file(file_name):
    """A Python process sleeping in code compiled with file_name."""
    label, python = interpreters()[0]
    code = ("import time\nc = compile('time.sleep(300)', %r, 'exec')\n"
            "print('ready', flush=True)\nexec(c)\n" % file_name)
    p = subprocess.Popen([python, "-c", code], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        # (asleep, in the code of that name: the only sleep after "ready")
        wait_until(lambda: state(p.pid) == "S", "the target to sleep")
        yield p
    finally:
        p.kill()
        p.wait()


def test_source_path_is_a_fifo(tmp_path):
    """File names come from the target: one naming a FIFO must not make the
    text output wait for a writer."""
    fifo = str(tmp_path / "code.py")
    os.mkfifo(fifo)
    with sleeping_in_file(fifo) as p:
        r = pyunwind("dump", str(p.pid))  # (a dump that waits: timed out)
        assert r.returncode == 0, r.stderr
        assert 'File "%s", line 1, in <module>' % fifo in r.stdout


def test_non_utf8_file_name_in_json():
    """A code object's file name with bytes that are not UTF-8 (Python
    keeps them as surrogate escapes): the JSON stays valid UTF-8 and reads
    back as the same str; options may follow the pid."""
    name = "/tmp/caf\udce9-\udcff.py"  # latin-1 bytes of a foreign system
    with sleeping_in_file(name) as p:
        r = subprocess.run([PYUNWIND, "dump", str(p.pid), "--json"],
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        import json
        dump = json.loads(r.stdout.decode("utf-8"))  # strict UTF-8
        files = [f["file"] for t in dump["threads"] for f in t["frames"]]
        assert name in files, files


def test_stopped_process_stays_stopped(tmp_path):
    """A process someone stopped (SIGSTOP) is read and left stopped; it
    runs again on SIGCONT."""
    label, python = interpreters()[0]
    t = Target(python, "stacks.py", str(tmp_path), ["--threads", "2",
                                                     "--depth", "5",
                                                     "--no-subinterpreter"])
    try:
        os.kill(t.pid, signal.SIGSTOP)
        # (every thread stops when it next runs: a loaded machine may take
        # its time)
        wait_until(lambda: set(states(t.pid).values()) == {"T"},
                   "every thread to stop")
        r = pyunwind("dump", "--json", str(t.pid))
        assert r.returncode == 0, r.stderr
        assert set(states(t.pid).values()) == {"T"}, states(t.pid)
        os.kill(t.pid, signal.SIGCONT)
        wait_until(lambda: state(t.pid) in ("S", "R"), "the target to run")
    finally:
        t.close()


# ----------------------------------------------------------------- cores

@pytest.fixture(scope="module")
def cores():
    """A kernel core of a Python program and of a non-Python program."""
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    d = tempfile.mkdtemp(prefix="pyu-bad-")
    label, python = [p for p in interpreters() if not p[0].endswith("t")][0]
    t = Target(python, "stacks.py", d, ["--threads", "3", "--depth", "20"])
    py_core = t.abort()
    os.rename(py_core, os.path.join(d, "python.core"))
    sub = os.path.join(d, "sleep")
    os.mkdir(sub)
    p = subprocess.Popen(["sleep", "300"], cwd=sub, preexec_fn=allow_core)
    time.sleep(0.2)
    os.kill(p.pid, signal.SIGABRT)
    p.wait()
    names = [n for n in os.listdir(sub) if n.startswith("core")]
    assert names, "no core from sleep"
    yield {"python": os.path.join(d, "python.core"), "python_exe": python,
           "sleep": os.path.join(sub, names[0]), "dir": d}
    shutil.rmtree(d)


def test_core_of_python_reads(cores):
    r = pyunwind("dump", "--core", cores["python"])
    assert r.returncode == 0, r.stderr


def test_empty_core(tmp_path):
    f = tmp_path / "empty"
    f.write_bytes(b"")
    assert_one_line_error(pyunwind("dump", "--core", str(f)), 3, "empty")


def test_random_core(tmp_path):
    f = tmp_path / "random"
    f.write_bytes(random.Random(1).randbytes(1 << 20))
    assert_one_line_error(pyunwind("dump", "--core", str(f)), 3,
                          "not an ELF file")


def test_text_core(tmp_path):
    f = tmp_path / "text"
    f.write_text("this is not a core file\n" * 100)
    assert_one_line_error(pyunwind("dump", "--core", str(f)), 3,
                          "not an ELF file")


def test_directory_core(tmp_path):
    assert_one_line_error(pyunwind("dump", "--core", str(tmp_path)), 3,
                          "directory")


def test_missing_core(tmp_path):
    assert_one_line_error(pyunwind("dump", "--core", str(tmp_path / "nope")),
                          3, "No such file")


def test_executable_as_core(cores):
    assert_one_line_error(pyunwind("dump", "--core", cores["python_exe"]), 3,
                          "not a core file")


def test_core_of_non_python(cores):
    assert_one_line_error(pyunwind("dump", "--core", cores["sleep"]), 4,
                          "no CPython runtime found")


@contextlib.contextmanager
def core_copy(src, tmp_path):
    """A sparse copy of a core (cores are mostly holes: a dense copy takes
    gigabytes), removed afterwards."""
    dst = str(tmp_path / "core")
    subprocess.run(["cp", "--sparse=always", src, dst], check=True)
    try:
        yield dst
    finally:
        os.unlink(dst)


@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.6, 0.9, 0.999])
def test_truncated_core(cores, tmp_path, fraction):
    with core_copy(cores["python"], tmp_path) as f:
        os.truncate(f, int(os.path.getsize(f) * fraction))
        r = pyunwind("dump", "--core", f)
    assert_no_crash(r)
    if r.returncode in (3, 4):
        assert "cut off" in r.stderr or "not" in r.stderr, r.stderr


def load_segments(path):
    """(offset, filesz) of the PT_LOAD segments of a core."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True,
                         text=True, check=True).stdout
    segs = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD" and int(f[4], 16) > 0:
            segs.append((int(f[1], 16), int(f[4], 16)))
    return segs


@pytest.mark.parametrize("seed", range(12))
def test_corrupted_core(cores, tmp_path, seed):
    """Random bytes flipped inside the segments: garbage pointers, loops,
    absurd sizes.  Whatever comes out, it is not a crash or a hang."""
    rng = random.Random(seed)
    # a segment at random, then a byte in it: small segments (the
    # interpreter's data, the heap, frame chunks) are hit as often as the
    # large, mostly empty thread stacks
    segs = load_segments(cores["python"])
    with core_copy(cores["python"], tmp_path) as f:
        with open(f, "r+b") as out:
            for _ in range(50 + seed * 200):
                off, size = rng.choice(segs)
                out.seek(off + rng.randrange(size))
                out.write(bytes([rng.randrange(256)]))
        r = pyunwind("dump", "--core", f, "--no-source", timeout=60)
    assert_no_crash(r)



@pytest.fixture(scope="module")
def incomplete_core(cores):
    """A copy of the Python core with one mapping zeroed (as gcore leaves
    memory it cannot read) such that some thread's frames read as zeros,
    and the CLI's result on it."""
    segs = [(off, size) for off, size in load_segments(cores["python"])
            if size <= 64 << 20]
    path = os.path.join(cores["dir"], "incomplete.core")
    subprocess.run(["cp", "--sparse=always", cores["python"], path],
                   check=True)
    with open(path, "r+b") as out:
        for off, size in segs:
            out.seek(off)
            keep = out.read(size)
            out.seek(off)
            out.write(bytes(size))
            out.flush()
            r = pyunwind("dump", "--core", path, "--no-source")
            if r.returncode == 5:
                break
            out.seek(off)
            out.write(keep)
    assert r.returncode == 5, "no mapping whose loss leaves a stack " \
        "incomplete"
    yield path, r
    os.unlink(path)


def test_incomplete_stacks_say_why(incomplete_core):
    """Exit 5 (some stacks incomplete) says on stderr, in one line, how
    many threads of how many could not be read to their end and why (the
    first one's error), as the JSON of the same core has them."""
    import json
    path, r = incomplete_core
    err = r.stderr.strip()
    assert "\n" not in err, err
    m = re.match(r"^pyunwind: warning: (\d+) of (\d+) threads could not "
                 r"be read to their end \(thread (\d+): (.+)\)$", err)
    assert m, err
    dump = json.loads(pyunwind("dump", "--json", "--core", path).stdout)
    bad = [t for t in dump["threads"] if t["error"]]
    assert int(m.group(1)) == len(bad) >= 1
    assert int(m.group(2)) == len(dump["threads"])
    assert int(m.group(3)) == bad[0]["native_thread_id"]
    assert m.group(4) == bad[0]["error"]


@pytest.mark.debugger
def test_incomplete_stacks_say_why_in_the_debuggers(cores, incomplete_core):
    """gdb's and lldb's py-dump print the CLI's warning line."""
    from debuggers import Gdb, Lldb
    path, r = incomplete_core
    for dbg in (Gdb(), Lldb()):
        pre, args, post = dbg.core(cores["python_exe"], path)
        tr = dbg.run(["py-dump --no-source", *post], args, setup=pre)
        assert r.stderr.strip() in tr.text, (dbg.name, tr.text[-2000:])


def test_fifo_as_core(tmp_path):
    """A FIFO given as the core: refused at once, not a read that waits for
    a writer forever."""
    f = tmp_path / "fifo"
    os.mkfifo(f)
    assert_one_line_error(pyunwind("dump", "--core", str(f)), 3,
                          "not a regular file")


def test_fifos_in_the_sysroot(cores, tmp_path):
    """A sysroot where the files the core names are FIFOs (a hostile or
    odd tree): every open that would wait is refused, the dump ends."""
    import json
    exe = cores["python_exe"]
    # the files NT_FILE names: the paths in the core's notes
    out = subprocess.run(["readelf", "-lW", cores["python"]],
                         capture_output=True, text=True).stdout
    note = [line.split() for line in out.splitlines()
            if line.split()[:1] == ["NOTE"]][0]
    with open(cores["python"], "rb") as f:
        f.seek(int(note[1], 16))
        notes = f.read(int(note[4], 16))
    paths = {m.decode() for m in re.findall(rb"(/[\x21-\x7e]+)\x00", notes)
             if os.path.isfile(m.decode())}
    assert os.path.realpath(exe) in {os.path.realpath(p) for p in paths}, \
        sorted(paths)[:5]
    for p in paths:
        d = str(tmp_path) + os.path.dirname(p)
        os.makedirs(d, exist_ok=True)
        if not os.path.exists(str(tmp_path) + p):
            os.mkfifo(str(tmp_path) + p)
    r = pyunwind("dump", "--json", "--core", cores["python"], "--sysroot",
                 str(tmp_path), timeout=60)
    assert r.returncode in (0, 3, 4, 5), r.stderr
    if r.returncode in (0, 5):
        json.loads(r.stdout)
    else:
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_thousand_threads_that_come_and_go(tmp_path):
    """1,000 threads, each replaced as soon as it ends: dumps (stopping the
    target, and without stopping it) and a sampling run end cleanly, with
    stacks of hundreds of threads; never a crash, a hang or a target left
    stopped.  How many threads are alive at a dump, and how many samples
    a run takes, is the machine's speed (a loaded one once left 299 alive
    at a dump that wanted 300; with a compiler on both CPUs the target
    starts threads too slowly to keep many alive): every run must be
    clean, and each is made again, up to a deadline, until it has shown
    over a hundred threads."""
    import json
    python = py315(interpreters())
    t = Target(python, "threads.py", str(tmp_path), expect_threads=False)
    deadline = time.time() + 240
    try:
        main = t.truth["main"]
        for args in (["--json"], ["--json", "--nonblocking"]) * 2:
            while True:
                r = pyunwind("dump", *args, str(t.pid), timeout=120)
                assert r.returncode in (0, 5), r.stderr
                dump = json.loads(r.stdout)
                assert dump["threads"][0]["native_thread_id"] == main
                if r.returncode == 5:
                    assert r.stderr.startswith("pyunwind: warning: "), \
                        r.stderr
                if len(dump["threads"]) > 100:
                    break
                assert time.time() < deadline, (
                    "no dump saw more than 100 threads", len(dump["threads"]))
        while True:
            r = pyunwind("sample", "-d", "2", "--format", "json", str(t.pid),
                         timeout=120)
            assert r.returncode == 0, r.stderr
            # (3.15: the sampler writes anchors into thread states, which
            # threads that end free: a write after that aborted the target)
            time.sleep(0.5)
            assert t.proc.poll() is None, "the target died while sampled"
            assert "the target exited" not in r.stderr, r.stderr
            prof = json.loads(r.stdout)
            # threads came and went: the run sampled threads born after
            # the dump before it.  (The ASan build reads 64-74 samples a
            # second of 1,000 threads, the release build 180; a loaded
            # machine fewer, and keeps fewer threads alive)
            before = {th["native_thread_id"] for th in dump["threads"]}
            born = {th["native_thread_id"] for th in prof["threads"]} - before
            if prof["samples"] > 10 and prof["total"] > 10 * 50 and \
                    len(born) >= 10:
                break
            assert time.time() < deadline, (
                prof["samples"], prof["total"], len(born),
                len(prof["threads"]), len(before))
        for tid in os.listdir("/proc/%d/task" % t.pid)[:50]:
            try:
                with open("/proc/%d/task/%s/stat" % (t.pid, tid)) as f:
                    assert f.read().rsplit(")", 1)[1].split()[0] != "t"
            except (FileNotFoundError, ProcessLookupError):
                pass  # (the thread ended: open gives ENOENT, read ESRCH)
    finally:
        t.close()


def assert_dump_of_killed(code, out, err, pid):
    """A dump of a target killed while it ran: its result, or one line."""
    assert code in (0, 3, 4, 5), (code, err)
    assert not any(m in err for m in SANITIZER_MARKS), err
    if code in (3, 4):
        assert err.startswith("pyunwind: error: ") and \
            err.count("\n") == 1, err
    else:
        assert out.startswith("Process %d:" % pid), out[:200]


def test_target_killed_mid_read(tmp_path):
    """The target SIGKILLed while a dump reads it (stopping it, or not):
    the dump ends with its result or one line, never a crash or a hang."""
    rng = random.Random(3)
    python = py315(interpreters())
    for i in range(8):
        d = tmp_path / str(i)  # (a fresh truth file each time)
        d.mkdir()
        t = Target(python, "stacks.py", str(d),
                   ["--threads", "16", "--depth", "60"])
        args = ["dump", str(t.pid)] + (["--nonblocking"] if i % 2 else [])
        p = subprocess.Popen([PYUNWIND, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0, 0.01))
        os.kill(t.pid, signal.SIGKILL)
        out, err = p.communicate(timeout=60)
        t.close()
        assert_dump_of_killed(p.returncode, out, err, t.pid)


def test_target_killed_while_its_threads_stop(tmp_path):
    """A target of 65 threads SIGKILLed while a dump stops them: every
    thread is asked to stop before any is waited for, and a killed
    process reports its main thread's end only after the others' ends
    were collected, in any order; the dump must still end (it hung in 5
    of 60 such kills when it waited for one thread at a time)."""
    rng = random.Random(5)
    python = py315(interpreters())
    script = tmp_path / "threads.py"
    script.write_text(
        "import threading, time\n"
        "def f(d):\n"
        "    if d:\n"
        "        return f(d - 1)\n"
        "    while True:\n"
        "        time.sleep(0.001)\n"
        "for _ in range(64):\n"
        "    threading.Thread(target=f, args=(40,), daemon=True).start()\n"
        "print('ready', flush=True)\n"
        "f(40)\n")
    for _ in range(40):
        t = subprocess.Popen([python, str(script)], stdout=subprocess.PIPE,
                             text=True)
        assert t.stdout.readline() == "ready\n"
        p = subprocess.Popen([PYUNWIND, "dump", str(t.pid)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        delay = rng.uniform(0.0005, 0.004)
        time.sleep(delay)
        t.kill()
        try:
            out, err = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail("the dump hung on a target killed %.1f ms into it"
                        % (1000 * delay))
        finally:
            t.wait()
            t.stdout.close()
        assert_dump_of_killed(p.returncode, out, err, t.pid)


def test_forking_target(tmp_path):
    """A target that forks all the time (each child a copy of it, running
    a little and exiting): the parent samples as usual, and a child, a
    CPython process of its own, dumps with the stack it runs."""
    import json
    python = py315(interpreters())
    script = tmp_path / "forker.py"
    script.write_text(
        "import os, sys, time\n"
        "def in_child():\n"
        "    time.sleep(3)\n"
        "def in_parent():\n"
        "    while True:\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            in_child()\n"
        "            os._exit(0)\n"
        "        time.sleep(0.05)\n"
        "        os.waitpid(-1, os.WNOHANG)\n"
        "print('ready', flush=True)\n"
        "in_parent()\n")
    p = subprocess.Popen([python, str(script)], stdout=subprocess.PIPE,
                         text=True, preexec_fn=allow_core)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        r = pyunwind("sample", "-d", "1", "--format", "json", str(p.pid))
        assert r.returncode == 0, r.stderr
        prof = json.loads(r.stdout)
        names = {f["name"] for f in prof["functions"]}
        assert "in_parent" in names and "in_child" not in names, names
        # A child lives 3 s (longer than a dump of the ASan build takes on
        # a loaded machine), so the one picked may still end before the
        # dump reads it: try again with a newer one, but one must be read.
        seen = []

        def read_one(_):
            children = open("/proc/%d/task/%d/children" % (p.pid, p.pid)) \
                .read().split()
            assert children
            r = pyunwind("dump", "--json", children[-1])
            seen.append((r.returncode, r.stderr.strip()))
            if r.returncode != 0 and state_or_gone(int(children[-1])) in \
                    "ZXx":
                return False  # (the child ended meanwhile)
            assert r.returncode == 0, r.stderr
            frames = [f["function"] for f in
                      json.loads(r.stdout)["threads"][0]["frames"]]
            if frames[0] == "in_parent":
                return False  # (read between the fork and the call)
            assert frames[0] == "in_child", frames
            return True
        until_shown(read_one)
    finally:
        p.kill()
        p.wait()


def state_or_gone(pid):
    """The state letter of process pid, "x" once it is gone."""
    try:
        return state(pid)
    except OSError:
        return "x"


def test_target_under_another_tracer(tmp_path):
    """A target that strace already traces (ptrace allows one tracer): the
    dump reads it without stopping it (one note on --verbose), sampling
    works, and strace still traces it afterwards."""
    import json
    python = py315(interpreters())
    t = Target(python, "stacks.py", str(tmp_path),
               ["--threads", "2", "--depth", "5"])
    try:
        with traced_by_strace(t.pid) as tracer:
            r = pyunwind("dump", "--json", str(t.pid))
            assert r.returncode == 0, r.stderr
            assert_matches_truth(json.loads(r.stdout), t.truth)
            samples = 0

            def run(_):  # (runs until 100 samples, however slow)
                nonlocal samples
                r = pyunwind("sample", "-d", "0.5", "--format", "json",
                             str(t.pid))
                assert r.returncode == 0, r.stderr
                samples += json.loads(r.stdout)["samples"]
                return samples > 100
            until_shown(run)
            with open("/proc/%d/status" % t.pid) as f:
                assert "TracerPid:\t%d\n" % tracer.pid in f.read()
    finally:
        t.close()


def test_sampling_a_stopped_process(tmp_path):
    """A process someone stopped (SIGSTOP): sampling reads it (its stacks
    do not move), blocking or not, and leaves it stopped."""
    import json
    python = py315(interpreters())
    t = Target(python, "stacks.py", str(tmp_path),
               ["--threads", "2", "--depth", "5", "--no-subinterpreter"])
    try:
        os.kill(t.pid, signal.SIGSTOP)
        # (every thread stops when it next runs: a loaded machine may take
        # its time)
        wait_until(lambda: set(states(t.pid).values()) == {"T"},
                   "every thread to stop")
        for extra in ([], ["--blocking"]):
            samples = 0

            def run(_):  # (runs until 50 samples, however slow)
                nonlocal samples
                r = pyunwind("sample", "-d", "0.5", "--format", "json",
                             *extra, str(t.pid))
                assert r.returncode == 0, r.stderr
                prof = json.loads(r.stdout)
                assert prof["failed"] == 0, prof
                # every sample the same stacks: one per thread
                assert len(prof["stacks"]) == len(prof["threads"]), \
                    prof["stacks"]
                assert set(states(t.pid).values()) == {"T"}, states(t.pid)
                samples += prof["samples"]
                return samples > 50
            until_shown(run)
    finally:
        os.kill(t.pid, signal.SIGCONT)
        t.close()
