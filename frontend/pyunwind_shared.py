"""What pyunwind's two debugger modules, pyunwind_gdb (gdb) and
pyunwind_lldb (lldb), have in common, once: pure Python, no debugger's API
in it.  It is installed beside each of them (CMakeLists.txt)."""


def sample_argv(duration=None, rate=None, mode=None, thread=None, gc=False,
                native=False, async_stacks=False, read_only=False,
                no_cache=False, blocking=False, opcodes=False,
                subprocesses=False):
    """py-sample's command line for sample()'s keywords."""
    argv = []
    for value, opt in ((duration, "-d"), (rate, "-r"), (mode, "--mode"),
                       (thread, "--thread")):
        if value is not None:
            argv += [opt, str(value)]
    for flag, name in ((gc, "--gc"), (native, "--native"),
                       (async_stacks, "--async"), (read_only, "--read-only"),
                       (no_cache, "--no-cache"), (blocking, "--blocking"),
                       (opcodes, "--opcodes"),
                       (subprocesses, "--subprocesses")):
        if flag:
            argv.append(name)
    return argv


def stacks(data):
    """[(native thread id, [(function, file, line), ...] outermost first,
    count)] of a profile's JSON as objects (docs/json.md#profiles): one
    entry per thread and stack, as collapsed has them (the statuses and,
    with opcodes, the instructions summed)."""
    counts = {}
    for st in data["stacks"]:
        frames = []
        for k in st["frames"]:
            fr = data["frames"][k]
            fn = data["functions"][fr["function"]]
            frames.append((fn["name"], fn["file"], fr["line"]))
        key = (data["threads"][st["thread"]]["native_thread_id"],
               tuple(frames))
        counts[key] = counts.get(key, 0) + st["count"]
    return [(tid, list(frames), n) for (tid, frames), n in counts.items()]


def formats(rows):
    """{name: {"summary", "binary", "keeps_instructions"}} of the core's
    table of formats, given as (name, summary, binary, keeps) rows in its
    order."""
    return {name: {"summary": summary, "binary": bool(binary),
                   "keeps_instructions": bool(keeps)}
            for name, summary, binary, keeps in rows}
