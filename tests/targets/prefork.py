"""A forking server (socketserver.ForkingMixIn) on loopback, for sampling a
service whose workers come and go with its requests.

    python prefork.py

Prints its port, then "ready".  A request is one line, "SECONDS": the
process the server forked for the connection answers "PID" at once, then
runs three() (3 ms busy) and one() (1 ms busy) by turns, as
tests/targets/split.py's main thread, for SECONDS or until the client
sends another line (a test that stops it once a run has the samples it
needs), and answers "T3 T1": the time the two took by its own clock,
preemption included.  The server itself waits in serve_forever().
"""
import os
import select
import socketserver
import time

from split import clock, timed_turn  # (split.py's, beside it)


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        seconds = float(self.rfile.readline())
        self.wfile.write(b"%d\n" % os.getpid())
        self.wfile.flush()
        t3 = t1 = 0.0
        end = clock() + seconds
        while clock() < end and not select.select([self.connection], [],
                                                   [], 0)[0]:
            d3, d1 = timed_turn()
            t3 += d3
            t1 += d1
            time.sleep(0.004)  # (two workers leave the CPUs room)
        self.wfile.write(b"%.6f %.6f\n" % (t3, t1))


class Server(socketserver.ForkingMixIn, socketserver.TCPServer):
    allow_reuse_address = True


def main():
    with Server(("127.0.0.1", 0), Handler) as server:
        print(server.server_address[1], flush=True)
        print("ready", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
