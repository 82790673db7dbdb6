"""pyunwind serve: Go's pprof endpoints, read by real clients -- `go tool
pprof` fetching over HTTP itself, and curl -- against targets that know
their own shares (tests/targets/split.py: three() 3 ms, one() 1 ms, a
sleeper) and their own tasks (tests/targets/tasks.py)."""
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import (PYUNWIND, RUNNING, TIMEOUT, Target, allow_core,
                      interpreters, matrix, samples_for, until_shown,
                      wait_until)
from test_formats import pprof_raw
from test_sample import split_target, state_of

# one interpreter of each version and one free-threaded: 3.11 (Debian's,
# stripped), 3.13, 3.14 free-threaded, 3.15 (Debian's, stripped)
KINDS = [p for p in interpreters() if p[0] in
         ("3.11.2-debian", matrix("3.13"), matrix("3.14t"),
          "3.15.2-debian")] or \
    interpreters()[:1]
ONE = KINDS[:1]
CURL = shutil.which("curl")


class Server:
    """pyunwind serve on a free loopback port; what it writes on standard
    error is kept as it comes (log()), for a test to wait on."""

    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [PYUNWIND, "serve", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=allow_core)
        line, m = "", None
        for _ in range(5):  # (--verbose may say more before)
            line = self.proc.stderr.readline()
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)/debug/"
                          r"pprof/", line)
            if m or not line:
                break
        if not m:
            self.close()
            raise RuntimeError("serve did not start: %r %s"
                               % (line, self.proc.stderr.read()))
        self.base = m.group(1)
        self._lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self._lines.append(line)

    def log(self):
        """Its standard error so far (after the line it listens on)."""
        return "".join(list(self._lines))

    def wait_log(self, condition, what):
        """Until condition(log()) holds (--verbose: a sampling loop
        started, or let go)."""
        wait_until(lambda: condition(self.log()), what)

    def url(self, path):
        return self.base + "/debug/pprof/" + path

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(10)


def curl(url, *args):
    """(status, body) of a GET by curl."""
    if not CURL:
        pytest.fail("curl is not installed (scripts/setup --asan installs "
                    "it)")
    r = subprocess.run([CURL, "-sS", "-o", "-", "-w", "\n%{http_code}",
                        *args, url], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    body, _, status = r.stdout.rpartition("\n")
    return int(status), body


def raw(url):
    """go tool pprof -raw, fetching url itself: (sample types, period,
    [(values, labels text, function names innermost first)])."""
    return pprof_raw(url, labels=True)


def share_of(samples, tid):
    """three()'s share of three() and one() on thread tid, and their
    count."""
    three = one = 0
    for values, labels, funcs in samples:
        if "tid:%d]" % tid not in labels:
            continue
        three += values[0] * ("three" in funcs)
        one += values[0] * ("one" in funcs)
    return three / max(1, three + one), three + one


def on_thread(samples, tid):
    return sum(v[0] for v, labels, _ in samples if "tid:%d]" % tid in labels)


def split_of(samples, tid):
    """(three()'s samples, one()'s) on thread tid."""
    three = one = 0
    for values, labels, funcs in samples:
        if "tid:%d]" % tid in labels:
            three += values[0] * ("three" in funcs)
            one += values[0] * ("one" in funcs)
    return three, one


@pytest.mark.parametrize("label,python", KINDS, ids=[p[0] for p in KINDS])
def test_profiles_and_stacks_over_http(label, python, workdir):
    """go tool pprof fetches a cpu and a wall profile at once (one
    sampling loop feeds both): each has its own mode, its samples at its
    own rate, the target's 3:1 split; goroutine gives each thread's stack
    now, as pprof, as counts (debug=1) and as the dump's text (debug=2)."""
    t = split_target(python, workdir)
    srv = Server("--verbose", str(t.pid))
    try:
        roles = t.truth["roles"]
        # Pairs of scrapes until one pair has shown each profile at its
        # rate (nearly every tick served: a loaded machine may miss more
        # in a pair) and the one sampling loop that fed both, and the
        # pairs' samples together judge each split to 0.08
        # (conftest.samples_for); every pair is checked for what must
        # hold of any.
        shown = {"rates": False, "one loop": False}
        split = {"cpu": [0, 0], "wall": [0, 0]}

        def attempt(_):
            got = {}
            began = "sampling process %d (" % t.pid
            ended = "process %d let go" % t.pid
            # (the pair before let go: its loop's lines are its own)
            srv.wait_log(lambda log: log.count(began) == log.count(ended),
                         "the last loop's end")
            before = len(srv.log())

            def fetch(name, query):
                got[name] = raw(srv.url("profile?" + query))
            scrapes = [threading.Thread(target=fetch, args=a) for a in
                       (("cpu", "seconds=3"),
                        ("wall", "seconds=3&mode=wall&rate=200"))]
            for s in scrapes:
                s.start()
            for s in scrapes:
                s.join()
            types, period, cpu = got["cpu"]
            assert types == ["samples/count", "cpu/nanoseconds"], types
            assert period == 10000000
            _, n_cpu = share_of(cpu, roles["main"])
            assert n_cpu <= 320, n_cpu
            assert on_thread(cpu, roles["sleeper"]) == 0
            # (a continuous profiler keeps processes apart by their labels)
            assert all("pid:[%d]" % t.pid in labels and "process:[" in labels
                       for _, labels, _ in cpu), cpu
            types, period, wall = got["wall"]
            assert types == ["samples/count", "wall/nanoseconds"], types
            assert period == 5000000
            _, n_wall = share_of(wall, roles["main"])
            assert n_wall <= 640, n_wall
            asleep = on_thread(wall, roles["sleeper"])
            assert abs(asleep - n_wall) < n_wall * 0.1, (asleep, n_wall)
            for name, samples in (("cpu", cpu), ("wall", wall)):
                three, one = split_of(samples, roles["main"])
                split[name][0] += three
                split[name][1] += one
            shown["rates"] |= n_cpu >= 210 and n_wall >= 420
            # the two scrapes had one sampler: one loop, started once
            # (when the second came before the first's loop had ended; a
            # go tool pprof slow to start on a loaded machine may come
            # after it, and the pair is tried again)
            srv.wait_log(lambda log: ended in log[before:],
                         "the pair's loop to end")
            log = srv.log()[before:]
            gets = [i for i, line in enumerate(log.splitlines())
                    if "GET /debug/pprof/profile" in line]
            end = [i for i, line in enumerate(log.splitlines())
                   if ended in line][0]
            if len(gets) == 2 and max(gets) < end:
                assert log.count(began) == 1, log
                shown["one loop"] = True
            need = samples_for(0.08)
            return all(shown.values()) and \
                all(sum(c) >= need for c in split.values())
        until_shown(attempt)
        for name, (three, one) in split.items():
            assert abs(three / (three + one) - 0.75) < 0.08, \
                (name, three, one)

        types, _, now = raw(srv.url("goroutine"))
        main = [f for _, labels, f in now if "tid:%d]" % roles["main"]
                in labels]
        sleeper = [f for _, labels, f in now
                   if "tid:%d]" % roles["sleeper"] in labels]
        assert len(main) == 1 and main[0][-1] == "<module>", now
        assert len(sleeper) == 1 and sleeper[0][0] == "sleeper", now
        status, text = curl(srv.url("goroutine?debug=1"))
        assert status == 200 and text.startswith("thread profile: total 2")
        assert re.search(r"^#\tsleeper\t\S+split\.py:\d+$", text, re.M), text
        status, text = curl(srv.url("goroutine?debug=2&pid=%d" % t.pid))
        assert status == 200 and "Process %d: CPython" % t.pid in text
        assert 'in sleeper' in text, text
        status, text = curl(srv.url(""))
        assert status == 200 and ">%d</td>" % t.pid in text
        assert state_of(t.pid) in RUNNING
    finally:
        srv.close()
        t.close()


@pytest.mark.parametrize("label,python", ONE, ids=[p[0] for p in ONE])
def test_every_error_is_a_status_and_a_line(label, python, workdir):
    t = split_target(python, workdir)
    srv = Server(str(t.pid))
    try:
        cases = [
            ("profile?seconds=abc", 400, "seconds must be a whole number"),
            ("profile?seconds=0", 400, "from 1 to 3600"),
            ("profile?seconds=3601", 400, "from 1 to 3600"),
            ("profile?seconds=1&mode=heap", 400, "mode must be"),
            ("profile?seconds=1&rate=0", 400, "rate must be"),
            ("profile?seconds=1&hz=9", 400, "unknown parameter 'hz'"),
            ("profile?seconds=1&pid=1", 404, "not one of this server's"),
            ("goroutine?debug=3", 400, "debug must be 0, 1 or 2"),
            ("tasks?x=1", 400, "unknown parameter 'x'"),
            ("allocs", 404, "no allocs profile"),
            ("heap", 404, "no heap profile"),
            ("block", 404, "no block profile"),
            ("mutex", 404, "no mutex profile"),
            ("trace", 404, "no such profile: trace"),
        ]
        for path, want, says in cases:
            status, body = curl(srv.url(path))
            assert (status, body.count("\n")) == (want, 1), (path, body)
            assert says in body, (path, body)
        status, body = curl(srv.base + "/metrics")
        assert status == 404 and "under /debug/pprof/" in body
        status, body = curl(srv.url("goroutine"), "-X", "POST")
        assert status == 405
        # the server serves on
        status, body = curl(srv.url("goroutine?debug=1"))
        assert status == 200
    finally:
        srv.close()
        t.close()


@pytest.mark.parametrize("label,python", ONE, ids=[p[0] for p in ONE])
def test_bad_clients_delay_no_scrape(label, python, workdir):
    """A thousand idle connections, a half-sent request, a client that
    hangs up mid-profile: a scrape beside them gets its whole profile on
    time, and the server serves on."""
    t = split_target(python, workdir)
    srv = Server(str(t.pid))
    host, port = srv.base.rsplit("/", 1)[1].split(":")
    socks = []
    try:
        for i in range(1000):
            s = socket.create_connection((host, int(port)), timeout=60)
            if i % 2:
                s.sendall(b"GET /debug/pprof/profile?sec")  # half a request
            socks.append(s)
        # Scrapes beside them until one has its whole profile (nearly every
        # tick served: a loaded machine may miss more in one) and their
        # samples together judge the split to 0.1 (conftest.samples_for).
        # A scrape the idle clients held up would wait for them (they
        # never finish) and fail go tool pprof (its fetch's timeout) and
        # go_pprof's.
        whole, split = [False], [0, 0]

        def attempt(_):
            gone = socket.create_connection((host, int(port)), timeout=60)
            gone.sendall(b"GET /debug/pprof/profile?seconds=2 HTTP/1.1\r\n"
                         b"Host: x\r\n\r\n")
            gone.close()  # hangs up while its profile is taken
            _, _, samples = raw(srv.url("profile?seconds=2&mode=wall"))
            three, one = split_of(samples, t.truth["roles"]["main"])
            assert three + one <= 220, (three, one)
            whole[0] |= three + one >= 160
            split[0] += three
            split[1] += one
            return whole[0] and sum(split) >= samples_for(0.1)
        until_shown(attempt)
        assert abs(split[0] / sum(split) - 0.75) < 0.1, split
        status, _ = curl(srv.url("goroutine?debug=1"))
        assert status == 200
        assert srv.proc.poll() is None
    finally:
        for s in socks:
            s.close()
        srv.close()
        t.close()


@pytest.mark.parametrize("label,python", ONE, ids=[p[0] for p in ONE])
def test_a_target_that_exits_mid_scrape(label, python, workdir):
    """The scrape of a target that exits ends with what it has; the
    other target's scrape is whole; then SIGTERM ends the server and
    leaves the target running."""
    long = split_target(python, workdir)
    other = os.path.join(workdir, "short")
    os.makedirs(other)
    short = Target(python, "split.py", other, expect_threads=False)
    srv = Server("--verbose", str(short.pid), str(long.pid))
    try:
        got = {}

        def fetch(name, pid):
            got[name] = raw(srv.url("profile?seconds=4&mode=wall&pid=%d"
                                    % pid))
        scrapes = [threading.Thread(target=fetch, args=a) for a in
                   (("short", short.pid), ("long", long.pid))]
        for s in scrapes:
            s.start()
        # the short one exits (split.py on SIGUSR1) a second into its
        # scrape, which the log tells began
        srv.wait_log(lambda log: "sampling process %d (" % short.pid in log,
                     "the short target's scrape to begin")
        time.sleep(1)
        os.kill(short.pid, signal.SIGUSR1)
        for s in scrapes:
            s.join()
        _, n = share_of(got["short"][2], short.truth["roles"]["main"])
        assert 0 < n < 250, n  # (what it had: about 1 s of 4)
        # the other's whole: nearly every tick of its 4 s (a loaded
        # machine may miss more: scraped again until one has them)
        def whole(k):
            if k:
                fetch("long", long.pid)
            _, n = share_of(got["long"][2], long.truth["roles"]["main"])
            assert n <= 440, n
            return n >= 360
        until_shown(whole)
        status, text = curl(srv.url(""))
        assert status == 200 and ">%d</td>" % long.pid in text
        assert ">%d</td>" % short.pid not in text
        # SIGTERM with a scrape under way (its loop begun, a second of it
        # sampled): it ends with what it has, the server exits, the
        # target runs on
        began = "sampling process %d (" % long.pid
        loops = srv.log().count(began)
        fetcher = threading.Thread(target=fetch, args=("last", long.pid))
        fetcher.start()
        srv.wait_log(lambda log: log.count(began) > loops,
                     "the last scrape to begin")
        time.sleep(1)
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=TIMEOUT) == 0
        fetcher.join()
        assert got["last"][2], got["last"]
        srv.close()  # (its log read to the end)
        assert "SIGTERM: stopping" in srv.log()
        wait_until(lambda: state_of(long.pid) in RUNNING,
                   "the target to run on")
    finally:
        srv.close()
        short.close()
        long.close()


# (asyncio's tasks are read from 3.14 on)
ASYNC = [p for p in KINDS if not p[0].startswith(("3.9", "3.10", "3.11",
                                                 "3.12", "3.13"))][-1:]


@pytest.mark.parametrize("label,python", ASYNC, ids=[p[0] for p in ASYNC])
def test_all_finds_targets_as_they_start(label, python, workdir):
    """--all: a CPython process started after the server is a target, the
    server itself and a process that is not Python are not; tasks shows
    an asyncio target's tasks."""
    srv = Server("--all")
    t = None
    try:
        t = Target(python, "tasks.py", workdir, expect_threads=False)
        # (found by the server's next look at /proc: waited for)
        wait_until(lambda: ">%d</td>" % t.pid in curl(srv.url(""))[1],
                   "the server to find the new target")
        status, text = curl(srv.url(""))
        assert status == 200 and ">%d</td>" % t.pid in text, text
        assert ">%d</td>" % srv.proc.pid not in text
        status, text = curl(srv.url("tasks?pid=%d" % t.pid))
        assert status == 200, text
        names = {n for v in t.truth["tasks_by_thread"].values() for n in v}
        assert names and all(n in text for n in names), (names, text)
    finally:
        if t:
            t.close()
        srv.close()


def test_usage_errors():
    for args, says in ((["--all", "1"], "--all takes no PIDs"),
                       ([], "give PIDs"),
                       (["--listen", "nowhere", "1"], "give ADDR:PORT"),
                       (["--listen", "host:80", "1"], "not an IP address"),
                       (["x"], "'x' is not a process id")):
        r = subprocess.run([PYUNWIND, "serve", *args], capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert says in r.stderr, r.stderr
    r = subprocess.run([PYUNWIND, "serve", str(os.getpid() + 10 ** 6)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 3 and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("label,python", ONE, ids=[p[0] for p in ONE])
def test_subprocesses_serves_the_tree(label, python, workdir):
    """--subprocesses: every CPython process of the tree is a target (the
    shell between two is not); goroutine and a profile hold each one's
    threads under its pid label."""
    from test_subprocesses import tree
    with tree(python, workdir) as (pid, truth):
        srv = Server("--subprocesses", str(pid))
        try:
            want = {pid: "parent_park"}
            for role in ("pool", "spawned", "forkserved", "shelled"):
                want.update((child, "%s_park" % role) for child in truth[role])
            parked = {}

            def found():  # (the server's looks at the tree: waited for)
                _, _, now = raw(srv.url("goroutine"))
                parked.clear()
                for _, labels, funcs in now:
                    m = re.search(r"pid:\[(\d+)\]", labels)
                    assert m, labels
                    parked.setdefault(int(m.group(1)), set()).update(funcs)
                return all(park in parked.get(p, ()) for p, park in
                           want.items())
            wait_until(found, "every process of the tree")
            assert "parent_park" in parked[pid], parked
            for role in ("pool", "spawned", "forkserved", "shelled"):
                for child in truth[role]:
                    assert "%s_park" % role in parked.get(child, ()), \
                        (role, child, parked)
            assert truth["shell"] not in parked
            _, _, prof = raw(srv.url("profile?seconds=1&mode=wall"))
            pids = {int(m.group(1)) for _, labels, _ in prof
                    for m in [re.search(r"pid:\[(\d+)\]", labels)] if m}
            assert set(parked) <= pids, (sorted(parked), sorted(pids))
        finally:
            srv.close()


@pytest.mark.parametrize("label,python", ONE, ids=[p[0] for p in ONE])
def test_index_page_in_chromium(label, python, workdir):
    """The index page in headless chromium: the target's row (pid and
    command line), links to every endpoint, and its dump link opens the
    target's dump."""
    from test_formats import web_harness
    t = split_target(python, workdir)
    srv = Server(str(t.pid))
    try:
        got = web_harness("serve_index.mjs", srv.url(""), "serve-index")
        assert got["errors"] == [], got["errors"]
        assert got["title"] == "/debug/pprof/"
        assert [r[:1] for r in got["rows"]] == [[str(t.pid)]], got["rows"]
        assert "split.py" in got["rows"][0][1]
        for path in ("profile?seconds=30", "goroutine", "goroutine?debug=1",
                     "goroutine?debug=2", "tasks"):
            assert srv.url(path) in got["links"], (path, got["links"])
        assert got["dump"].startswith("Process %d: CPython" % t.pid), \
            got["dump"][:300]
    finally:
        srv.close()
        t.close()
