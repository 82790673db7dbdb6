"""A process tree parked at known places, for --subprocesses.

    python tree.py TRUTH.json

Starts, with the interpreter running it:
    pool        two workers of a multiprocessing Pool (start method fork),
                each parked in pool_park()
    spawned     a Process started by spawn, parked in spawned_park()
    forkserved  a Process started by forkserver, parked in forkserved_park()
    shelled     /bin/sh -c '...; :' running this file again with
                --shelled, parked in shelled_park(): the shell stays between
                (it cannot exec its last command), a process that is not
                Python between two that are

Each child writes its pid to a file of its role; once every one has,
TRUTH.json gets {"parent": pid, role: [pids], "shell": pid}, and the
parent parks in parent_park(), which prints "ready".  Start it in a session of
its own (the test ends the tree with os.killpg).
"""
import json
import multiprocessing
import os
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def park_here(directory, role):
    with open(os.path.join(directory, "%s.%d" % (role, os.getpid())), "w"):
        pass
    while True:
        time.sleep(3600)


def pool_park(directory):
    park_here(directory, "pool")


def spawned_park(directory):
    park_here(directory, "spawned")


def forkserved_park(directory):
    park_here(directory, "forkserved")


def shelled_park(directory):
    park_here(directory, "shelled")


def parent_park():
    # ("ready" from here: a reader that starts at once finds the parent
    # parked, where one that followed a print in main() could find main()
    # still, its thread switched out between the two on a loaded machine)
    print("ready", flush=True)
    while True:
        time.sleep(3600)


def main():
    truth_path = sys.argv[1]
    directory = os.path.join(os.path.dirname(os.path.abspath(truth_path)),
                             "roles")
    os.makedirs(directory, exist_ok=True)
    pool = multiprocessing.get_context("fork").Pool(2)
    for _ in range(2):
        pool.apply_async(pool_park, (directory,))
    procs = [multiprocessing.get_context("spawn").Process(
                 target=spawned_park, args=(directory,)),
             multiprocessing.get_context("forkserver").Process(
                 target=forkserved_park, args=(directory,))]
    for p in procs:
        p.start()
    shell = subprocess.Popen(["/bin/sh", "-c", '"$0" "$1" --shelled "$2"; :',
                              sys.executable, HERE, directory])
    want = {"pool": 2, "spawned": 1, "forkserved": 1, "shelled": 1}
    deadline = time.time() + 240  # (spawn and forkserver on a loaded machine)
    while True:
        roles = {}
        for name in os.listdir(directory):
            role, pid = name.split(".")
            roles.setdefault(role, []).append(int(pid))
        if all(len(roles.get(r, ())) == n for r, n in want.items()):
            break
        if time.time() > deadline:
            sys.exit("the tree did not start: %r" % roles)
        time.sleep(0.02)
    roles.update(parent=os.getpid(), shell=shell.pid)
    with open(truth_path, "w") as f:
        json.dump(roles, f)
    parent_park()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--shelled":
        shelled_park(sys.argv[2])
    else:
        main()
