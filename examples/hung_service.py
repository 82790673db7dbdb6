"""A small service that hangs: a worker waits for a lock that a cache
refresh holds while its backend call never returns.  `pyunwind dump PID`
shows where each thread is."""

import threading
import time

lock = threading.Lock()
ready = threading.Barrier(3)


class Cache:
    def refresh(self):
        with lock:
            ready.wait()
            self._slow_backend_call()

    def _slow_backend_call(self):
        time.sleep(3600)  # the "backend" never answers


def handle_request(cache):
    ready.wait()
    with lock:  # blocks: refresh() holds the lock
        return "ok"


def main():
    cache = Cache()
    threading.Thread(target=cache.refresh, name="refresher", daemon=True).start()
    threading.Thread(target=handle_request, args=(cache,), name="worker",
                     daemon=True).start()
    ready.wait()
    time.sleep(0.2)
    print("stuck", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main()
