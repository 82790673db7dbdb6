"""The examples in README.md and docs/ are what the binary prints today.

Every code block of the docs that shows a pyunwind command with its output
is run again here, as a user would run it, on the kind of target it names,
and the output compared with the block line by line, modulo what differs
from run to run: pids, thread ids, addresses, the path of the checkout and
of the interpreters (a doctest's habit).  A block says what its tokens stand
for in an HTML comment right above it, which a reader of the page does not
see:

    <!-- example: 28800=hung_service -->          the pid 28800 is a process
                                                  of examples/hung_service.py
    <!-- example: 10259=tasks_cycle@3.14.7t -->   ... of tasks.py --cycle on
                                                  that interpreter
    <!-- example: build/demo/busy.raw=busy_raw numbers unordered -->

`numbers`: every number may differ (a profile's counts); `unordered`: rows of
a table that tie may come in either order.  Another tool's commands in a
block (`go tool pprof`, `npx ...`) are not run, nor their lines compared.
Lines `...` and `[... ...]` in a block stand for lines left out; `(exit N)` at the end of a line is the exit
code, not output (else it is 0); a command shown without output is run
for its exit code alone.  A block that cannot be run here says why instead:
`<!-- not checked: WHY -->`; a block with neither fails the test, so a new
example cannot escape.  The gdb sessions (`$ gdb`, then `(gdb) ...` lines)
run in gdb with the plugin."""

import contextlib
import difflib
import glob
import os
import re
import select
import shlex
import subprocess
import time

import pytest

from conftest import (DEADLINE, PYUNWIND, ROOT, TIMEOUT, TARGETS,
                      interpreters, labelled)

PYTHONS = interpreters()
# (how long a block that does not match yet is tried again: a target
# getting to where the example shows it; PYU_DOCS_DEADLINE=0 to see a
# drift at once)
RETRY = float(os.environ.get("PYU_DOCS_DEADLINE", DEADLINE))

PLUGINS = os.environ.get("PYUNWIND_PLUGINS", os.path.join(ROOT, "build"))
PAGES = [os.path.join(ROOT, "README.md")] + \
    sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
DEFAULT_PYTHON = "3.15.2-debian"
# The checkout the docs' examples were run in, and where the interpreters'
# libraries are (shown whole or as `…`).
DOC_ROOT = "/work/main"
LIBDIR = re.compile(r"(/var/cache/pyunwind/pythons/[^/\s\"]+/usr/lib|…)")
NOTE = re.compile(r"^\s*<!-- (example|not checked): ?(.*?) ?-->\s*$")
COMMAND = re.compile(r"^(\$ |\(gdb\) |\(lldb\) )")
ELIDED = re.compile(r"^\s*(\.\.\.|\[\.\.\.[^\]]*\])\s*$")
EXIT = re.compile(r"\s+\(exit (\d+)\)$")
# A sampler's word on ticks it missed: a busy machine's, not the example's.
MISSED = re.compile(r"^pyunwind: why ticks were missed ")


def code_blocks(path):
    """(line number, note, lines) of each code block of a page, fenced or
    indented by four spaces; note is the (kind, text) of the comment right
    above it, or None."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(\s*)```", line)
        prev = lines[i - 1] if i else ""
        start = i
        if fence:
            indent = len(fence.group(1))
            j = i + 1
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            body = [x[indent:] for x in lines[i + 1:j]]
            i = j + 1
        elif line.startswith("    ") and not prev.strip():
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or
                                      (not lines[j].strip() and j + 1 <
                                       len(lines) and
                                       lines[j + 1].startswith("    "))):
                j += 1
            body = [x[4:] for x in lines[i:j]]
            i = j
            prev = lines[start - 2] if start >= 2 else ""
        else:
            i += 1
            continue
        note = NOTE.match(lines[start - 1] if start else "") or \
            (NOTE.match(prev) if not fence else None)
        out.append((start + 1, note and (note.group(1), note.group(2)),
                    body))
    return out


def is_example(body):
    """A block that shows a pyunwind command (or a debugger session) and
    what it printed."""
    for k, line in enumerate(body):
        if re.match(r"^\$ (build/)?pyunwind |^\((gdb|lldb)\) ", line) and \
                k + 1 < len(body) and body[k + 1].strip() and \
                not COMMAND.match(body[k + 1]) and \
                not (line.startswith("$") and body[k + 1].startswith("#")):
            return True
    return False


def examples():
    for page in PAGES:
        for line, note, body in code_blocks(page):
            if is_example(body) or (note and note[0] == "example"):
                yield pytest.param(page, line, note, body,
                                   id="%s:%d" % (os.path.relpath(page, ROOT),
                                                 line))


EXAMPLES = list(examples())


# ---- the targets a block names ------------------------------------------

def ready_line(argv, cwd):
    """A process started with argv, once it printed its first line."""
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    ready, _, _ = select.select([p.stdout], [], [], TIMEOUT)
    if not ready or not p.stdout.readline():
        p.kill()
        p.wait()
        raise RuntimeError("%s did not start" % argv)
    return p


def start(token, role, python, workdir, stack):
    """What the token stands for (a pid or a path), its process ended when
    stack closes."""
    def run(argv, cwd=workdir):
        p = ready_line(argv, cwd)
        stack.callback(p.wait)
        stack.callback(p.kill)
        return str(p.pid)

    if role in ("hung_service", "orders"):
        return run([python, os.path.join(ROOT, "examples", role + ".py")])
    if role in ("split", "tasks_running", "tasks_cycle"):
        script, *args = {"split": ["split.py"],
                         "tasks_running": ["tasks.py", "--running"],
                         "tasks_cycle": ["tasks.py", "--cycle"]}[role]
        return run([python, os.path.join(TARGETS, script),
                    os.path.join(workdir, "truth.json"), *args])
    if role == "sleeping":
        return run([python, "-c", "import time; print('ready', flush=True);"
                    " time.sleep(300)"])
    if role == "file":  # a file of that name, in the working directory
        open(os.path.join(workdir, token), "w").close()
        return token
    if role == "sleep":
        return run(["sh", "-c", "echo ready; exec sleep 300"])
    if role == "busy_raw":
        # (10 s: the README's three hottest functions come in its order
        # but once in millions of such runs)
        path = os.path.join(workdir, "busy.raw")
        r = subprocess.run([PYUNWIND, "sample", "-d", "10", "-o", path, "--",
                            python, os.path.join(ROOT, "examples",
                                                 "busy_job.py"), "10"],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        return path
    raise AssertionError("docs: no target of the kind %r" % role)


def parse_note(text):
    """{token: (role, python label)} and the options of a note."""
    tokens, options = {}, set()
    for word in text.split():
        if "=" in word:
            token, role = word.split("=", 1)
            role, _, label = role.partition("@")
            tokens[token] = (role, label or DEFAULT_PYTHON)
        else:
            options.add(word)
    assert options <= {"numbers", "unordered"}, options
    return tokens, options


# ---- what is compared ----------------------------------------------------

def normalize(text, subs, options, root):
    """text with what differs from run to run made the same: subs (the
    targets' values, or the doc's tokens, by name), the checkout, the
    interpreters' library path, addresses, thread ids; with `numbers`,
    every number."""
    if not text:
        return []
    for value, name in subs:
        text = re.sub(r"(?<![\w.])%s(?![\w])" % re.escape(value),
                      "<%s>" % name, text)
    text = text.replace(root, "<root>")
    text = LIBDIR.sub("…", text)
    text = re.sub(r"0x[0-9a-f]+", "0x…", text)
    text = re.sub(r"\bnative \d+", "native N", text)
    text = re.sub(r"\"(thread_id|native_thread_id)\": \d+", r'"\1": N', text)
    if "numbers" in options:  # (and the widths of the columns)
        text = re.sub(r"\d+(\.\d+)?", "N", text)
        text = re.sub(r"(?<=\S)  +", " ", text)
        text = re.sub(r"(?m)^ +(?=N)", " ", text)
    lines = [line.rstrip() for line in text.split("\n")]
    if "unordered" in options:  # rows of a table, sorted within each run
        out, run = [], []
        for line in lines + [""]:
            if re.match(r"^ N ", line):
                run.append(line)
                continue
            out += sorted(run) + [line]
            run = []
        lines = out[:-1]
    return lines


def matches(want, got):
    """got is want, where an elided line of want stands for any lines."""
    pattern = "".join(r"(?:[^\n]*\n)*?" if ELIDED.match(line)
                      else re.escape(line) + r"\n" for line in want)
    return re.fullmatch(pattern, "".join(line + "\n" for line in got),
                        re.S) is not None


def sessions(body):
    """The block as [(command, expected lines, exit code)]: a shell command
    with the lines up to the next; a debugger session as one entry, its
    commands (the `$` line, then each `(gdb)` line) and all they printed."""
    out = []
    for line in body:
        if line.startswith("$ "):
            out.append([line[2:], [], None])
        elif line.startswith("(gdb) ") and out:
            out[-1][1].append(line)
        elif out:
            m = EXIT.search(line)
            if m:
                line = line[:m.start()]
                out[-1][2] = int(m.group(1))
            out[-1][1].append(line)
    while out and out[-1][1] and not out[-1][1][-1].strip():
        out[-1][1].pop()
    for k in range(1, len(out)):  # `echo $?` says the code before
        if out[k][0] == "echo $?" and out[k][1]:
            out[k - 1][2] = int(out[k][1][0])
    return out


def run_command(command, workdir, values, last_rc):
    """What a shell command of a block prints: (exit code, stderr then
    stdout)."""
    words = shlex.split(command, comments=True)
    words = [values.get(w, w) for w in words]
    if words[:1] == ["echo"] and words[1:] == ["$?"]:
        return 0, "%d\n" % last_rc, ""
    as_nobody = "as nobody" in command
    argv = [PYUNWIND] + words[1:]
    if as_nobody:
        argv = ["setpriv", "--reuid=nobody", "--regid=nogroup",
                "--clear-groups"] + argv
    r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                       cwd=workdir)
    return r.returncode, r.stdout, r.stderr


def run_gdb(command, lines, values):
    """A gdb session of a block: its `(gdb)` commands in one batch run,
    attached as the `$ gdb` line says; what they printed, from the first
    line the block shows."""
    words = [values.get(w, w) for w in shlex.split(command, comments=True)]
    assert words[0] == "gdb", command
    argv = ["gdb", "-nx", "-batch"] + words[1:]
    cmds = [x[len("(gdb) "):] for x in lines if x.startswith("(gdb) ")]
    for cmd in cmds:
        cmd = cmd.replace("build/pyunwind-gdb.py",
                          os.path.join(PLUGINS, "pyunwind-gdb.py"))
        argv += ["-ex", " ".join(values.get(w, w) for w in cmd.split(" "))]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=TIMEOUT)
    return [x for x in r.stdout.splitlines()
            if not re.match(r"^\[Inferior \d+ \(process \d+\) detached\]$",
                            x)]


def one_try(body, tokens, options, values, workdir):
    """(want, got) of every command of the block, normalized; or None when
    all matched."""
    doc_subs = [(tok, role) for tok, (role, _) in tokens.items()]
    got_subs = [(values[tok], role) for tok, (role, _) in tokens.items()]
    last_rc = 0
    for command, lines, rc in sessions(body):
        want = normalize("\n".join(lines), doc_subs, options, DOC_ROOT)
        if command.startswith("gdb "):
            got_lines = run_gdb(command, lines, values)
            got = normalize("\n".join(got_lines), got_subs, options, ROOT)
            want = [x for x in want if not x.startswith("(gdb) ")]
            # (what gdb says as it attaches comes before)
            if want and want[0] in got:
                got = got[got.index(want[0]):]
        elif not re.match(r"^(build/)?pyunwind |^echo ", command):
            continue  # another tool's command: its output is its own
        else:
            # (a terminal shows the command's stdout and stderr in the
            # order they were written, which a pipe does not keep: its
            # own lines, "pyunwind: ...", are compared with its stderr,
            # in their order, and the others with its stdout)
            last_rc, out, err = run_command(command, workdir, values,
                                            last_rc)
            if not any(MISSED.match(x) for x in lines):
                err = "".join(x for x in err.splitlines(True)
                              if not MISSED.match(x))
            mine = [x.startswith("pyunwind: ") for x in lines]
            want = normalize("\n".join(x for x, m in zip(lines, mine) if m),
                             doc_subs, options, DOC_ROOT) + \
                normalize("\n".join(x for x, m in zip(lines, mine)
                                    if not m), doc_subs, options, DOC_ROOT)
            got = normalize(err.rstrip("\n"), got_subs, options, ROOT) + \
                normalize(out.rstrip("\n"), got_subs, options, ROOT)
            if last_rc != (rc or 0) and not command.startswith("echo"):
                return command, ["(exit %d)" % (rc or 0)] + want, \
                    ["(exit %d)" % last_rc] + got
        if lines and not matches(want, got):
            return command, want, got
    return None


@pytest.mark.release
@pytest.mark.parametrize("page,line,note,body", EXAMPLES)
def test_example_as_documented(page, line, note, body, tmp_path):
    """The block's commands print what the block shows (modulo pids,
    addresses and paths); a target that is still getting to where the
    example shows it is read again until the deadline."""
    assert note, "%s:%d: an example without a note saying what its pids " \
        "are (<!-- example: PID=ROLE -->) or why it is not checked " \
        "(<!-- not checked: WHY -->)" % (page, line)
    kind, text = note
    if kind == "not checked":
        assert text, "%s:%d: say why it is not checked" % (page, line)
        pytest.skip(text)
    tokens, options = parse_note(text)
    if any(c.startswith("gdb ") for c, _, _ in sessions(body)):
        if not os.path.exists(os.path.join(PLUGINS, "pyunwind-gdb.py")):
            pytest.skip("no gdb plugin built")
    workdir = str(tmp_path)
    with contextlib.ExitStack() as stack:
        values = {}
        for tok, (role, label) in tokens.items():
            python = label if label.startswith("/") else \
                labelled(PYTHONS, label)
            values[tok] = start(tok, role, python, workdir, stack)
        end = time.monotonic() + RETRY
        while True:
            failed = one_try(body, tokens, options, values, workdir)
            if failed is None or time.monotonic() > end:
                break
            time.sleep(0.5)
    if failed:
        command, want, got = failed
        diff = "\n".join(difflib.unified_diff(want, got, "documented",
                                              "printed now", lineterm=""))
        pytest.fail("%s:%d: `%s` prints other than documented:\n%s"
                    % (os.path.relpath(page, ROOT), line, command, diff))


def test_every_example_is_found():
    """The parser sees the examples the pages have (a parser that found
    none would pass every page)."""
    pages = {os.path.basename(p.values[0]) for p in EXAMPLES}
    assert {"README.md", "dump.md", "tasks.md"} <= pages, pages
    assert len(EXAMPLES) >= 10, [p.id for p in EXAMPLES]
