/* tools/spillctl/help.h - spillctl's help text and command names (help.c). Pure; any thread. */
#ifndef SPW_SPILLCTL_HELP_H
#define SPW_SPILLCTL_HELP_H

#include <stdbool.h>
#include <stdio.h>

/* Whether name is one of spillctl's commands. */
bool spw_ctl_known_command(const char *name);
/* The commands' names, comma-separated, to f. */
void spw_ctl_command_list(FILE *f);
/* The help for cmd (its synopsis, options, the common options and exit statuses), or for every command when
 * cmd is NULL or unknown. */
void spw_ctl_usage(FILE *f, const char *cmd);

#endif
