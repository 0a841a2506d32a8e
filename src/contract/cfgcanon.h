/* cfgcanon: the one authoritative reading of a config text (docs/security.md, "Config text:
 * one reading"). The daemon parses what dyno sent once, strictly, checks that reading and hands
 * out only the canonical text it produced, so no consumer (our poller, Kineto, Python) can read
 * a different dict out of it. */
#ifndef MSMON_CONTRACT_CFGCANON_H
#define MSMON_CONTRACT_CFGCANON_H

#include <stddef.h>

/* Worst-case length of a refusal reason, terminator included. */
#define CFGCANON_WHY_MAX 256

/* Read text[0..len) strictly and write its canonical form. Accepted: valid UTF-8 lines split on
 * '\n'; blank lines; otherwise exactly one '=' between a key of [A-Z0-9_] and a value, with
 * spaces and tabs around either trimmed. Refused, each with one line naming the line and the
 * bad value in why: a control character other than the line feed and TAB (CR, ESC, DEL ...), C1
 * controls, any non-ASCII whitespace or line separator (U+00A0, U+0085, U+2028, U+3000 ...),
 * '#' (Kineto's comment), a second '=', an empty or non-[A-Z0-9_] key, a key repeated, more
 * than KVTEXT_MAX_KEYS keys, invalid UTF-8, a NUL.
 * Canonical form: "KEY=value" lines in input order joined by '\n', with a final '\n' iff the
 * input ended with one; an accepted canonical text is its own canonical form.
 * On success *ret_text (NUL-terminated, the caller frees it) and *ret_len; 0, -EINVAL
 * (refused; why filled), -ENOMEM. */
int cfgcanon_text(const char *text, size_t len, char **ret_text, size_t *ret_len, char *why,
                  size_t whycap);

/* Python's str.isspace() for code point cp (what str.strip()/split() treat as blank): the
 * consumers written in Python read keys and values through it. */
int cfgcanon_py_isspace(unsigned cp);

#endif
