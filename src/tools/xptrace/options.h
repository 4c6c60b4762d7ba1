/* The options of a subcommand, one table: getopt's arrays, `--help`,
 * `xptrace avail`'s list and docs' Markdown tables are made from it, so
 * a default cannot say one thing in one place and another elsewhere
 * (tests/xptrace/test_docs.sh diffs the docs with the tool's output). */
#ifndef XPTRACE_OPTIONS_H
#define XPTRACE_OPTIONS_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

struct xopt {
  const char *name; /* long name, no dashes; NULL ends the table */
  int key;          /* the short letter, or a value >= 256: getopt_long returns it */
  int has_arg;      /* no_argument, required_argument, optional_argument */
  const char *arg;  /* the value's name ("DIR", "[REGEX]"); NULL: none */
  const char *help; /* --help's words, plain text */
  /* Markdown (`code`, [links](page.md), \| in code): the docs' meaning
   * (NULL: the help's words) and the default, shown by --help and avail
   * as plain text; NULL or "off": none said. */
  const char *doc, *def;
};

struct xopt_cmd {
  const char *name;     /* "run" */
  const char *synopsis; /* the usage line(s), '\n'-ended */
  const struct xopt *opts;
  const char *epilog; /* after the options ('\n'-ended), NULL: none */
};

/* The subcommands whose options are tables (run.c, report.c, merge.c,
 * sample.c, causal.c). */
extern const struct xopt_cmd xopt_run, xopt_report, xopt_merge, xopt_sample, xopt_causal;

/* getopt_long's arrays: longopts (a NULL row ends it; max rows at most)
 * and the short options after `prefix` ("+:", ":"). */
void xopt_getopt(const struct xopt_cmd *c, struct option *longopts, size_t max,
                 const char *prefix, char *shorts, size_t len);
/* The --help text (synopsis, an option a line, wrapped, defaults said,
 * epilog) in buf; buf. */
const char *xopt_usage(const struct xopt_cmd *c, char *buf, size_t len);
/* docs' table: | option | meaning | default | */
void xopt_markdown(const struct xopt_cmd *c, FILE *out);
/* avail's list: "  --name ARG  default" per option with one. */
void xopt_defaults(const struct xopt_cmd *c, FILE *out);
/* The default of option `name` as the table says it (Markdown), NULL
 * when none: a parser starts from it, so the docs say what it does. */
const char *xopt_default(const struct xopt_cmd *c, const char *name);
/* The Markdown of docs as plain text: `code` unquoted, \| a bar, a
 * link its text. */
void xopt_plain(const char *md, char *buf, size_t len);

#endif /* XPTRACE_OPTIONS_H */
