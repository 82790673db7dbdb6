/* call_sites_driver PID: pyu_code_call_sites and pyu_code_reaches over
 * code objects of a live process (CPython 3.9, 3.10), read without
 * stopping it.  Questions come on stdin, one a line, code objects by
 * their address (decimal):
 *
 *     sites CODE            answered by a line per call instruction,
 *                           "START AT NAME" (its first code unit, the unit
 *                           of the call itself, the address of the name
 *                           its callable was loaded by, 0: not told),
 *                           then "end"
 *     reach CODE AT FROM... answered "1", "0" or "-1": whether the unit AT
 *                           can run after one of the units FROM
 *
 * tests/integration/test_call_sites.py holds the answers to what
 * tests/targets/callsites.py records of itself.  Exits 1 when the process
 * or a code object cannot be read, 2 on a malformed question. */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SITES 1024
#define MAX_FROM 64

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: call_sites_driver PID < QUESTIONS\n");
        return 2;
    }
    pyu_session *s = pyu_session_new();
    if (!s || pyu_open_pid(s, atoi(argv[1]), PYU_OPEN_NONBLOCKING) < 0) {
        fprintf(stderr, "call_sites_driver: %s\n",
                s ? pyu_errmsg(s) : "out of memory");
        return 1;
    }
    static pyu_call_site sites[MAX_SITES];
    char line[4096];
    int rc = 0;
    while (!rc && fgets(line, sizeof line, stdin)) {
        char *save, *word = strtok_r(line, " \n", &save);
        char *code = word ? strtok_r(NULL, " \n", &save) : NULL;
        if (!code) {
            rc = 2;
            break;
        }
        bool is_code;
        const pyu_code *c = pyu_code_get(s, strtoull(code, NULL, 10),
                                         &is_code);
        if (!c) {
            fprintf(stderr, "call_sites_driver: code object %s: %s\n", code,
                    pyu_errmsg(s));
            rc = 1;
        } else if (!strcmp(word, "sites")) {
            long n = pyu_code_call_sites(s, c, sites, MAX_SITES);
            if (n < 0) {
                fprintf(stderr, "call_sites_driver: code object %s: %s\n",
                        code, pyu_errmsg(s));
                rc = 1;
            }
            for (long k = 0; k < n; k++)
                printf("%u %u %" PRIu64 "\n", sites[k].start, sites[k].at,
                       sites[k].name);
            printf("end\n");
        } else if (!strcmp(word, "reach")) {
            char *at = strtok_r(NULL, " \n", &save), *w;
            uint32_t from[MAX_FROM];
            size_t n = 0;
            while (n < MAX_FROM && (w = strtok_r(NULL, " \n", &save)))
                from[n++] = (uint32_t)strtoul(w, NULL, 10);
            if (!at || !n) {
                rc = 2;
                break;
            }
            printf("%d\n", pyu_code_reaches(s, c, from, n,
                                            (uint32_t)strtoul(at, NULL, 10)));
        } else {
            rc = 2;
        }
    }
    if (rc == 2)
        fprintf(stderr, "call_sites_driver: a malformed question\n");
    pyu_session_free(s);
    return rc;
}
