/* Snapshots: the memory of a CPython process that pyunwind read, as
 * tests/fuzz/snapshot.c records it and the fuzz harnesses replay it
 * (mutated) behind a pyu_memory_ops.  Little-endian, packed:
 *
 *   snap_header                 magic "PYUSNAP1", pid, runtime address,
 *                               number of mappings
 *   nmaps x (snap_map, path)    the process's mappings, each with its
 *                               file's path (pathlen bytes, no NUL)
 *   u32 nranges
 *   nranges x (snap_range, data)  memory: len bytes at addr
 *   the rest                    (the sampler harness) changes to apply
 *                               between samples: snap_range + data each
 *
 * snap_parse reads one without trusting it: every count and length is
 * checked against what the input holds.
 */
#ifndef PYU_FUZZ_SNAP_H
#define PYU_FUZZ_SNAP_H

#include <stddef.h>
#include <stdint.h>

#include <pyunwind/pyunwind.h>

#define SNAP_MAGIC 0x3150414e53555950ull /* "PYUSNAP1" */

#pragma pack(push, 1)
typedef struct snap_header {
    uint64_t magic;
    uint32_t pid, flags;
    uint64_t runtime;
    uint32_t nmaps;
} snap_header;

typedef struct snap_map {
    uint64_t start, end, offset;
    uint32_t prot, pathlen;
} snap_map;

typedef struct snap_range {
    uint64_t addr;
    uint32_t len;
} snap_range;
#pragma pack(pop)

#define SNAP_MAX_MAPS 4096
#define SNAP_MAX_RANGES 65536

/* A parsed snapshot: pointers into the input (ranges' data is copied, so
 * that writes and changes can be applied). */
typedef struct snap {
    int pid;
    uint64_t runtime;
    pyu_mapping maps[SNAP_MAX_MAPS];
    char *paths; /* owned: each mapping's path, NUL-terminated */
    size_t nmaps;
    snap_range ranges[SNAP_MAX_RANGES];
    uint8_t *data[SNAP_MAX_RANGES]; /* owned copies */
    size_t nranges;
    const uint8_t *rest; /* the changes (not parsed) */
    size_t restlen;
} snap;

/* Parses in (len bytes) into *s; returns 0, or -1 when it is not a
 * snapshot (nothing is left to free then). */
int snap_parse(snap *s, const uint8_t *in, size_t len);
void snap_free(snap *s);
/* Applies the next change of s->rest (advancing it); false when none is
 * left. */
int snap_change(snap *s);
/* Memory ops over a parsed snapshot (ctx: the snap): reads, writes,
 * mappings (paths only under the interpreters' usual places; others as
 * anonymous memory, so that a mutated path never opens /proc or /dev). */
extern const pyu_memory_ops snap_ops;
/* py-print's lookups over a dump taken with PYU_WALK_LOCALS: in the
 * first frames of each thread, the names each sees, their attributes
 * and items (what snapshot.c records, the harnesses replay). */
void snap_lookups(pyu_session *s, const pyu_dump *d);

#endif
