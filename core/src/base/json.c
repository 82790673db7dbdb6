/* JSON pieces shared by the writers of dumps and task lists. */
#include "../internal.h"

#include <inttypes.h>

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    size_t n = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 ? 2 : 0;
    if (n == 0 || p[0] > 0xF4)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((p[0] == 0xE0 && p[1] < 0xA0) ||
                   (p[0] == 0xED && p[1] >= 0xA0)))
        return 0; /* overlong, or an encoded surrogate */
    if (n == 4 && ((p[0] == 0xF0 && p[1] < 0x90) ||
                   (p[0] == 0xF4 && p[1] >= 0x90)))
        return 0;
    return n;
}

/* A JSON string.  Bytes that are not UTF-8 (file names Python keeps with
 * surrogateescape) become \udcXX escapes, which Python's json module turns
 * back into the same str. */
void pyu_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            fprintf(out, "\\udc%02x", *p++);
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, out);
            p += n;
            continue;
        }
        switch (*p) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
        p++;
    }
    fputc('"', out);
}

void pyu_json_opt_str(FILE *out, const char *s)
{
    if (s)
        pyu_json_str(out, s);
    else
        fputs("null", out);
}

void pyu_json_signal_end(FILE *out, int signo, uint64_t tid)
{
    fputs(", \"signal\": ", out);
    if (signo)
        fprintf(out, "{\"number\": %d, \"native_thread_id\": %" PRIu64 "}}\n",
                signo, tid);
    else
        fputs("null}\n", out);
}

