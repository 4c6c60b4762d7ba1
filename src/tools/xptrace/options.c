/* Option tables made into getopt's arrays, --help, avail's list and docs'
 * Markdown (options.h). */
#include "options.h"

#include <stdbool.h>
#include <string.h>

enum { HELP_COL = 27, HELP_WIDTH = 92 };

void xopt_getopt(const struct xopt_cmd *c, struct option *longopts, size_t max,
                 const char *prefix, char *shorts, size_t len) {
  size_t n = 0, s = 0;
  s += (size_t)snprintf(shorts, len, "%s", prefix);
  for (const struct xopt *o = c->opts; o->name && n + 1 < max; o++) {
    longopts[n++] = (struct option){o->name, o->has_arg, NULL, o->key};
    if (o->key < 256 && s + 3 < len) {
      shorts[s++] = (char)o->key;
      if (o->has_arg != no_argument)
        shorts[s++] = ':';
      if (o->has_arg == optional_argument)
        shorts[s++] = ':';
      shorts[s] = '\0';
    }
  }
  longopts[n] = (struct option){NULL, 0, NULL, 0};
}

void xopt_plain(const char *md, char *buf, size_t len) {
  size_t n = 0;
  for (const char *p = md; *p && n + 1 < len; p++) {
    if (*p == '`')
      continue;
    if (*p == '\\' && p[1] == '|') {
      buf[n++] = '|';
      p++;
      continue;
    }
    if (*p == ']' && p[1] == '(') { /* a link: its text alone */
      const char *end = strchr(p, ')');
      if (end) {
        p = end;
        continue;
      }
    }
    if (*p == '[' && strstr(p, "](") && strchr(p, ']') == strstr(p, "]("))
      continue;
    buf[n++] = *p;
  }
  buf[n] = '\0';
}

static bool said(const char *def) { return def && *def && strcmp(def, "off") != 0; }

/* "-o, --output DIR" */
static void opt_words(const struct xopt *o, char *buf, size_t len) {
  char arg[64] = "";
  if (o->arg)
    xopt_plain(o->arg, arg + 1, sizeof arg - 1), arg[0] = ' ';
  if (o->key < 256)
    snprintf(buf, len, "-%c, --%s%s", o->key, o->name, arg);
  else
    snprintf(buf, len, "    --%s%s", o->name, arg);
}

/* Appends to buf[*n]. */
static void put(char *buf, size_t len, size_t *n, const char *s, size_t k) {
  if (*n + k + 1 > len)
    k = *n + 1 < len ? len - *n - 1 : 0;
  memcpy(buf + *n, s, k);
  *n += k;
  buf[*n] = '\0';
}

const char *xopt_usage(const struct xopt_cmd *c, char *buf, size_t len) {
  size_t n = 0;
  buf[0] = '\0';
  put(buf, len, &n, c->synopsis, strlen(c->synopsis));
  for (const struct xopt *o = c->opts; o->name; o++) {
    char words[96], text[1024], def[512];
    opt_words(o, words, sizeof words);
    if (said(o->def)) {
      xopt_plain(o->def, def, sizeof def);
      snprintf(text, sizeof text, "%s (default: %s)", o->help, def);
    } else {
      snprintf(text, sizeof text, "%s", o->help);
    }
    char line[128];
    int w = snprintf(line, sizeof line, "  %s", words);
    put(buf, len, &n, line, strlen(line));
    size_t col = (size_t)w;
    if (col + 2 > HELP_COL) { /* a long option: its words on the next line */
      put(buf, len, &n, "\n", 1);
      col = 0;
    }
    /* Words wrapped at HELP_WIDTH, every line from HELP_COL. */
    for (const char *p = text; *p;) {
      size_t k = strcspn(p, " ");
      if (col > HELP_COL && col + 1 + k > HELP_WIDTH) {
        put(buf, len, &n, "\n", 1);
        col = 0;
      }
      if (col < HELP_COL) {
        put(buf, len, &n, "                                ", HELP_COL - col);
        col = HELP_COL;
      } else {
        put(buf, len, &n, " ", 1);
        col++;
      }
      put(buf, len, &n, p, k);
      col += k;
      p += k;
      while (*p == ' ')
        p++;
    }
    put(buf, len, &n, "\n", 1);
  }
  if (c->epilog)
    put(buf, len, &n, c->epilog, strlen(c->epilog));
  return buf;
}

void xopt_markdown(const struct xopt_cmd *c, FILE *out) {
  fprintf(out, "| option | meaning | default |\n| --- | --- | --- |\n");
  for (const struct xopt *o = c->opts; o->name; o++) {
    if (strcmp(o->name, "help") == 0)
      continue;
    fputs("| ", out);
    if (o->key < 256)
      fprintf(out, "`-%c`, ", o->key);
    fprintf(out, "`--%s%s%s` | %s | %s |\n", o->name, o->arg ? " " : "", o->arg ? o->arg : "",
            o->doc ? o->doc : o->help, o->def ? o->def : "off");
  }
}

void xopt_defaults(const struct xopt_cmd *c, FILE *out) {
  for (const struct xopt *o = c->opts; o->name; o++) {
    if (!said(o->def))
      continue;
    char words[96], def[512];
    opt_words(o, words, sizeof words);
    xopt_plain(o->def, def, sizeof def);
    fprintf(out, "  %-24s  %s\n", words, def);
  }
}

const char *xopt_default(const struct xopt_cmd *c, const char *name) {
  for (const struct xopt *o = c->opts; o->name; o++)
    if (strcmp(o->name, name) == 0)
      return o->def;
  return NULL;
}
