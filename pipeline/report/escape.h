/* escape.h — text taken from data (run, stage and file names, errors, config
 * values) written into HTML: every such string goes through zp_escape_html,
 * never a "%s" into markup. */
#ifndef ZP_ESCAPE_H
#define ZP_ESCAPE_H

#include <stdio.h>

/* s as HTML text or as the value of a quoted attribute: & < > " ' as
 * character references, a control character as a space, and a byte that is
 * not well-formed UTF-8 as U+FFFD, so no string can open a tag, close an
 * attribute or break the page's encoding. NULL writes nothing. */
void zp_escape_html(FILE *out, const char *s);

#endif
