/* sample_pair PID SAMPLES CACHED.txt FULL.txt: samples a live process with
 * two samplers side by side, one with the frame cache (anchors written)
 * and one reading every stack whole (PYU_SAMPLE_NO_CACHE).  Before each
 * pair of samples the process is stopped (SIGSTOP, every thread seen in
 * state T), after it let go (SIGCONT) for a random moment, so both read
 * the same stacks while the stacks change between samples as the program
 * runs.  Writes both profiles as collapsed stacks; the test compares them.
 * Prints the cached sampler's statistics ("full N miss N writes N"). */
#include "pyunwind/pyunwind.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Every thread of pid stopped (or gone)? */
static int all_stopped(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return 1;
    int ok = 1;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char stat[320], buf[512];
        snprintf(stat, sizeof stat, "/proc/%d/task/%s/stat", pid, e->d_name);
        FILE *f = fopen(stat, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        ok = p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
    }
    closedir(d);
    return ok;
}

static int write_profile(pyu_profile *p, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int rc = pyu_profile_write_collapsed(p, f);
    return fclose(f) != 0 || rc < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: sample_pair PID SAMPLES CACHED FULL\n");
        return 2;
    }
    int pid = atoi(argv[1]), n = atoi(argv[2]);
    pyu_session *s = pyu_session_new();
    if (pyu_open_pid(s, pid, PYU_OPEN_NONBLOCKING) < 0) {
        fprintf(stderr, "sample_pair: %s\n", pyu_errmsg(s));
        return 1;
    }
    pyu_profile *pc = pyu_profile_new(), *pf = pyu_profile_new();
    pyu_sampler *cached, *full;
    pyu_sampler_opts oc = {PYU_MODE_WALL, 0, 0};
    pyu_sampler_opts of = {PYU_MODE_WALL, PYU_SAMPLE_NO_CACHE, 0};
    if (pyu_sampler_new(s, &oc, pc, &cached) < 0 ||
        pyu_sampler_new(s, &of, pf, &full) < 0) {
        fprintf(stderr, "sample_pair: %s\n", pyu_errmsg(s));
        return 1;
    }
    int rc = 0;
    srand(1);
    for (int i = 0; i < n && rc == 0; i++) {
        kill(pid, SIGSTOP);
        /* (a loaded machine may take its time to stop every thread: up to
         * 240 s, then the pair would not read the same stacks) */
        for (int w = 0; w < 2400000 && !all_stopped(pid); w++)
            usleep(100);
        if (!all_stopped(pid)) {
            kill(pid, SIGCONT);
            fprintf(stderr, "sample_pair: sample %d: the process did not "
                            "stop\n", i);
            rc = 1;
            break;
        }
        int a = pyu_sampler_take(cached), b = pyu_sampler_take(full);
        kill(pid, SIGCONT);
        if (a < 0 || b < 0 || a != b) {
            fprintf(stderr, "sample_pair: sample %d: cached %d, full %d: %s\n",
                    i, a, b, pyu_errmsg(s));
            rc = 1;
        }
        struct timespec t = {0, (rand() % 2000) * 1000L};
        nanosleep(&t, NULL);
    }
    pyu_sampler_stats st;
    pyu_sampler_stats_get(cached, &st);
    printf("full %llu miss %llu writes %llu torn %llu\n",
           (unsigned long long)st.cache_full,
           (unsigned long long)st.cache_miss,
           (unsigned long long)st.anchor_writes,
           (unsigned long long)st.torn);
    pyu_sampler_free(cached);
    pyu_sampler_free(full);
    if (write_profile(pc, argv[3]) < 0 || write_profile(pf, argv[4]) < 0)
        rc = 1;
    pyu_profile_free(pc);
    pyu_profile_free(pf);
    pyu_session_free(s);
    return rc;
}
