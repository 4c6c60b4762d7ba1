/* Ranking of a Coz-format profile (xptrace causal). */
#ifndef CAUSAL_REPORT_H
#define CAUSAL_REPORT_H

/* Read `profile` (profile.coz) and rank its lines per progress point.
 * With `dir`: writes causal.txt and causal.csv there and prints causal.txt
 * to stderr; without: prints the ranking to stdout.  Returns 0, or 1 (one
 * line said why) when the file cannot be read or holds no experiment. */
int causal_report_write(const char *profile, const char *dir);

#endif
