/* Subcommands of xptrace that live in files of their own. */
#ifndef XPTRACE_CMDS_H
#define XPTRACE_CMDS_H

/* xptrace finish DIR... */
int cmd_finish(int argc, char **argv);
/* Finish every recording under dir, printing each trace written;
 * *traces gets their number.  Returns 0, or 1 when one failed. */
int xptrace_finish_dir(const char *dir, int *traces);

#endif /* XPTRACE_CMDS_H */
