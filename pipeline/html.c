/* html.c — escaping of data written into HTML (html.h). */
#include "pipeline/html.h"

#include <stdint.h>
#include <string.h>

/* The length of the well-formed UTF-8 sequence at s (n > 0 bytes left), or
 * 0: no overlong form, no surrogate, nothing above U+10FFFF. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

void zp_html_str(FILE *out, const char *s)
{
    if (!s)
        return;
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t len = utf8_len(p + i, n - i);
        switch (c) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fputc(' ', out);
            else if (!len)
                fputs("&#xfffd;", out);
            else
                fwrite(p + i, 1, len, out);
        }
        i += len ? len : 1;
    }
}
