/* escape.c — escaping of data written into HTML (escape.h). */
#include "pipeline/report/escape.h"
#include "pipeline/base/json.h"

#include <stdint.h>
#include <string.h>

void zp_escape_html(FILE *out, const char *s)
{
    if (!s)
        return;
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t len = zp_json_utf8_len(p + i, n - i);
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
