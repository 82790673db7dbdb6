"""Target program for breakpoint-driven profiles: calls os.getppid() a
known number of times from two Python functions, then exits.

    python calls.py OFTEN SELDOM

often() calls it OFTEN times, seldom() SELDOM times; a debugger with a
breakpoint on getppid() that samples the stopped thread at each hit must
find often() and seldom() in that proportion exactly."""

import os
import sys


def often(n):
    for _ in range(n):
        os.getppid()


def seldom(n):
    for _ in range(n):
        os.getppid()


def main():
    often(int(sys.argv[1]))
    seldom(int(sys.argv[2]))


if __name__ == "__main__":
    main()
