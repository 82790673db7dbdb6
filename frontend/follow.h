/* Waiting for a sampling tick, and reading a running thread from its own
 * CPU: what the sampling run (sample.c) and the server's loops (scrape.c)
 * share. */
#ifndef PYUNWIND_FRONTEND_FOLLOW_H
#define PYUNWIND_FRONTEND_FOLLOW_H

#include "pyunwind/pyunwind.h"

#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The wait for a tick.  A sleep wakes late (timer slack, the scheduler):
 * tens of microseconds, more than a sample takes, so a schedule of sleeps
 * does not serve a high rate.  The wait sleeps until a little before the
 * tick (by the latest lateness seen, which it keeps learning) and spends
 * the rest reading the clock. */
typedef struct pyu_waiter {
    uint64_t late;   /* how late a sleep woke, recently at most */
    unsigned long slack; /* the thread's timer slack before the run */
    bool slack_set;
    bool sleep_only; /* on the target's CPU: time spent on the clock
                        there would be the target's (follower) */
} pyu_waiter;

/* Before the first wait (the thread's timer slack set to the least), and
 * after the last (the slack restored). */
void pyu_wait_start(pyu_waiter *w);
void pyu_wait_end(pyu_waiter *w);
/* Waits until `at` (CLOCK_MONOTONIC ns), or until *stop is set. */
void pyu_wait_until(pyu_waiter *w, uint64_t at, volatile sig_atomic_t *stop);

/* The schedule: tick k is due in the interval from start + k * interval
 * (at a random point of it, sample.c).  A tick whose time is past when
 * the sample before it ends is served at once, up to PYU_LATE_NS after
 * its own interval ended, and missed later than that.  The sampler loses
 * its CPU now and then for milliseconds, even on an idle machine (a
 * virtual CPU the host takes back: a loop reading the clock here lost 5
 * to 44 ms in 3 s, in gaps up to 8.6 ms); without this its ticks were
 * missed, 11 % of them at half the rate -r max reaches, and with it none
 * (bench/README.md, "The asked rate, served").  The ticks served late
 * come close together after such a gap, at the moments after it: as
 * likely any moment of the program as the ones it took. */
#define PYU_LATE_NS 10000000
/* The tick to serve after `tick`, at now (ns, as start), ticks served up
 * to `late` ns late: tick + 1, or a later one; *missed is set to the
 * ticks passed over. */
uint64_t pyu_sched_next(uint64_t start, uint64_t interval, uint64_t late,
                        uint64_t tick, uint64_t now, uint64_t *missed);

/* Reading a running thread from its own CPU.  A thread read from another
 * CPU runs on under the read: its stack is copied over a microsecond or
 * more, part by part, and a call that lasts less than that is often read
 * half-made or half-gone, so that short calls lose their share to the
 * long ones around them (bench/README.md, "Reading from the target's
 * CPU").  A thread read from the CPU it runs on is not running: the
 * sampler's wake-up switched it out, at whatever instruction it was, and
 * it waits while it is read -- one consistent state, as when it is
 * stopped, without a signal or ptrace.  So between samples the run sits
 * on the CPU of the thread the last sample found running Python
 * (pyu_sampler_cpu), and follows it when the scheduler moves it.  It costs
 * the target the samples' own time (a few microseconds each) and two
 * switches; so the wait for a tick sleeps there, never spins.  Only CPUs
 * the run was allowed at its start (taskset) are used, and the run's
 * affinity is restored at its end (a debugger's sampling thread).  Off
 * with --other-cpu, with --blocking (the threads are stopped), and at -r
 * max (the run would take half of the target's CPU). */
typedef struct pyu_follower {
    bool on;
    cpu_set_t allowed; /* the run's CPUs at its start */
    int cpu;           /* where it sits now; -1: on any of those */
    uint64_t moves;
    int policy;        /* the thread's scheduling before the run */
    struct sched_param param;
    bool realtime;     /* SCHED_FIFO now (see follow_realtime) */
    bool used_realtime;
    unsigned ticks, missed; /* in this window of MISSED_WINDOW ticks */
} pyu_follower;

/* Starts following (want: the caller reads a running target; interval:
 * the schedule's period, 0 at -r max, where it never follows). */
void pyu_follow_start(pyu_follower *f, bool want, uint64_t interval);
/* Moves the calling thread to the CPU of the thread sm's last sample
 * found running Python, when it is another; w then only sleeps. */
void pyu_follow(pyu_follower *f, pyu_waiter *w, pyu_sampler *sm);
/* After each tick: whether ticks were missed since the one before (over
 * 1 % of MISSED_WINDOW ticks: it stops following for good). */
void pyu_follow_tick(pyu_follower *f, pyu_waiter *w, bool missed);
/* Back to the thread's CPUs and scheduling of before. */
void pyu_follow_end(pyu_follower *f);

#ifdef __cplusplus
}
#endif
#endif
