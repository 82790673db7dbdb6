"""A target that counts the signals it is sent (tests/integration/
test_sample.py): SIGRTMIN+1, a real-time signal, so that none merges with
another pending one; each delivery writes one byte to the wakeup fd, and a
thread counts the bytes.  THREADS threads spin meanwhile.

usage: signals.py THREADS; prints "ready", then on a line from stdin waits
a moment and prints how many signals arrived."""
import os
import signal
import sys
import threading
import time

r, w = os.pipe()
os.set_blocking(w, False)
signal.set_wakeup_fd(w, warn_on_full_buffer=False)
signal.signal(signal.SIGRTMIN + 1, lambda *args: None)
arrived = 0


def count():
    global arrived
    while True:
        arrived += len(os.read(r, 4096))


def spin():
    x = 0
    while True:
        x += 1


threading.Thread(target=count, daemon=True).start()
for _ in range(int(sys.argv[1])):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
time.sleep(0.5)
print(arrived, flush=True)
