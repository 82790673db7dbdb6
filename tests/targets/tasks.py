"""Target program for the task tests: asyncio tasks parked in known shapes.

    python3.14 tasks.py TRUTH.json [--many N] [--cycle] [--running]
                        [--recursive N] [--deep N] [--chain N] [--churn]

Default: two event loops in two threads and the tasks a thread left behind
when it ended, covering TaskGroup, gather, shield, wait_for, a task awaiting
a bare Future, default Task-N names, eager tasks and a task iterating an
async generator that awaits a coroutine.  --many N: N more
tasks under one parent.  --cycle: two tasks awaiting each other.
--running: also a task "runner" that blocks the main loop in time.sleep
(the thread's running task), awaited by "waiter", awaited by main;
with --recursive N the runner's coroutine first awaits itself N times
(rec -> rec -> ... -> blocking_leaf).  --deep N: also a task "deep" whose
coroutine chain is N + 1 coroutines deep.  --chain N: also N tasks
"link-0" ... "link-N-1", each awaiting the one before, the first awaiting a
running task "chain-runner" that blocks the loop (instead of --running).
--churn: also tasks that never stop being created, renamed and finished
(for readers that must survive a running target).

Every task ends up waiting on a future that is never resolved, so from
"ready" on nothing changes until the process is killed: a reader of the
live process, of a gcore core and of the kernel's core sees the same.
Before "ready" it writes TRUTH.json: the names of the pending tasks of
each event loop, keyed by the native id of the thread that runs it ("0"
for the loop whose thread ended).
"""
import json
import argparse
import asyncio
import os
import sys
import threading
import time

NEVER = []        # futures nobody resolves
KEEP = []         # tasks of the finished thread, kept alive
LOOPS = {}        # native thread id (0: the thread ended) -> its loop


def when_settled(loop, then):
    """Calls then() once no task of loop is due to run: each is done or
    waits on a future not done.  (A fixed delay was too short for
    thousands of tasks on a loaded machine.)"""
    def check():
        if all(t.done() or (t._fut_waiter is not None and
                            not t._fut_waiter.done())
               for t in asyncio.all_tasks(loop)):
            then()
        else:
            loop.call_soon(check)
    loop.call_soon(check)


def never(loop):
    fut = loop.create_future()
    NEVER.append(fut)
    return fut


async def leaf(fut):
    await fut


async def child(fut):
    await leaf(fut)


async def task_group(fut):
    async with asyncio.TaskGroup() as tg:
        tg.create_task(child(fut), name="tg-first")
        tg.create_task(child(fut))


async def gathering(fut):
    await asyncio.gather(child(fut), child(fut))


async def shielding(fut):
    inner = asyncio.create_task(child(fut), name="shielded")
    await asyncio.shield(inner)


async def waiting_for(fut):
    await asyncio.wait_for(child(fut), timeout=86400)


async def bare_future(fut):
    await fut


async def numbers(fut):
    await leaf(fut)
    yield 1


async def consuming(fut):
    async for _ in numbers(fut):
        pass


async def many(fut, n):
    await asyncio.gather(*(asyncio.create_task(leaf(fut), name="many-%d" % i)
                           for i in range(n)))


async def blocking_leaf(ready):
    ready.set()
    time.sleep(3600)  # blocks the loop: this task stays the running one


async def blocking_child(ready):
    await blocking_leaf(ready)


async def rec(n, ready):
    if n:
        await rec(n - 1, ready)
    else:
        await blocking_leaf(ready)


async def waiter(ready, recursive):
    coro = rec(recursive, ready) if recursive else blocking_child(ready)
    await asyncio.create_task(coro, name="runner")


async def deep(n, fut):
    if n:
        await deep(n - 1, fut)
    else:
        await fut


async def chain_runner(ready):
    await asyncio.sleep(0.3)  # the links start and await it
    await blocking_leaf(ready)


async def link(task):
    await task


async def churning():
    n = 0
    while True:
        n += 1
        batch = [asyncio.create_task(asyncio.sleep(0), name="churn-%d" % i)
                 for i in range(50)]
        for t in batch[::3]:
            t.set_name(n)  # int names too
        await asyncio.gather(*batch)


async def cycle_a(box):
    await box["b"]


async def cycle_b(box):
    await box["a"]


async def main_loop(args, ready):
    loop = asyncio.get_running_loop()
    LOOPS[threading.get_native_id()] = loop
    fut = never(loop)
    if args.cycle:
        box = {}
        box["a"] = asyncio.create_task(cycle_a(box), name="cycle-a")
        box["b"] = asyncio.create_task(cycle_b(box), name="cycle-b")
        parts = [box["a"], box["b"]]
    else:
        parts = [
            asyncio.create_task(task_group(fut), name="task-group"),
            asyncio.create_task(gathering(fut), name="gathering"),
            asyncio.create_task(shielding(fut), name="shielding"),
            asyncio.create_task(waiting_for(fut), name="waiting-for"),
            asyncio.create_task(bare_future(fut)),  # a default Task-N name
            asyncio.create_task(consuming(fut), name="async-gen"),
        ]
        if args.churn:
            parts.append(asyncio.create_task(churning(), name="churner"))
        if args.running:
            parts.append(asyncio.create_task(waiter(ready, args.recursive),
                                             name="waiter"))
        if args.deep:
            parts.append(asyncio.create_task(deep(args.deep, fut),
                                             name="deep"))
        if args.chain:
            t = asyncio.create_task(chain_runner(ready), name="chain-runner")
            for i in range(args.chain):
                t = asyncio.create_task(link(t), name="link-%d" % i)
            parts.append(t)
        if args.many:
            parts.append(asyncio.create_task(many(fut, args.many),
                                             name="many-parent"))
    if not args.running and not args.chain:
        if args.churn:  # (never settles)
            loop.call_later(0.5, ready.set)
        else:
            when_settled(loop, ready.set)
    await asyncio.gather(*parts)


async def second_loop(started):
    loop = asyncio.get_running_loop()
    LOOPS[threading.get_native_id()] = loop
    loop.set_task_factory(asyncio.eager_task_factory)
    fut = never(loop)
    eager = asyncio.create_task(child(fut), name="eager-child")
    when_settled(loop, started.set)
    await asyncio.gather(eager, asyncio.create_task(gathering(fut),
                                                    name="second-gathering"))


def finished_thread():
    """Runs a loop that leaves pending tasks, then ends: the tasks move to
    the interpreter's list."""
    loop = asyncio.new_event_loop()
    LOOPS[0] = loop

    async def spawn():
        fut = never(loop)
        KEEP.append(asyncio.create_task(child(fut), name="orphan"))
        KEEP.append(asyncio.create_task(leaf(fut), name="orphan-leaf"))
        await asyncio.sleep(0)

    loop.run_until_complete(spawn())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("--many", type=int, default=0)
    ap.add_argument("--cycle", action="store_true")
    ap.add_argument("--running", action="store_true")
    ap.add_argument("--recursive", type=int, default=0)
    ap.add_argument("--deep", type=int, default=0)
    ap.add_argument("--chain", type=int, default=0)
    ap.add_argument("--churn", action="store_true")
    args = ap.parse_args()
    sys.setrecursionlimit(max(args.deep, args.recursive) + 1000)
    ready = threading.Event()
    if not args.cycle:
        t = threading.Thread(target=finished_thread)
        t.start()
        t.join()
        started = threading.Event()
        threading.Thread(target=lambda: asyncio.run(second_loop(started)),
                         name="second-loop", daemon=True).start()
        started.wait()

    def announce():
        ready.wait()
        time.sleep(0.3)
        truth = {str(tid): sorted(t.get_name() for t in asyncio.all_tasks(loop))
                 for tid, loop in LOOPS.items()}
        truth["0"] = sorted(t.get_name() for t in KEEP if not t.done())
        with open(args.truth + ".tmp", "w") as f:
            json.dump({"tasks_by_thread": truth}, f)
        os.replace(args.truth + ".tmp", args.truth)
        print("ready", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    asyncio.run(main_loop(args, ready))


if __name__ == "__main__":
    main()
