/* Fuzz harness: a frame's source lines and carets (writers/source_lines.c
 * and pyexpr.c), whose input is a source file and positions that the
 * target names: untrusted.  The input's first five bytes choose the
 * version's rules, the line, the lines the expression spans and its two
 * columns; the rest is the file. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sink = fopen("/dev/null", "w");
    return sink ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    static const int minors[] = {11, 12, 13, 14, 15, 16, 0, 3};
    if (len < 5)
        return 0;
    int minor = minors[in[0] & 7];
    int line = 1 + (in[1] & 31);
    int end_line = (in[0] & 0x80) ? 0 : line + (in[2] >> 5);
    int col = (in[0] & 0x40) ? -1 : in[3];
    int end_col = (in[0] & 0x20) ? -1 : in[4];
    pyu_source_lines(sink, (const char *)in + 5, len - 5, minor, line,
                     end_line, col, end_col);
    return 0;
}
