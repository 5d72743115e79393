/* Worker output: every line of every worker's stdout and stderr, prefixed "[<rank>]<stdout>:"
 * or "[<rank>]<stderr>:", goes to the launcher's stdout or stderr; with --output-filename also
 * (unprefixed) to DIR/rank.<N>/stdout and stderr. Single-threaded: the supervisor's loop owns it. */
#ifndef HVDS_LAUNCHER_OUTPUT_H_
#define HVDS_LAUNCHER_OUTPUT_H_

#include <poll.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_output hvds_output_t;

/* dir may be NULL. Creates DIR/rank.<N>/ for each of np ranks (N zero-padded to the width of
 * np-1, as horovodrun). The launcher's own output goes to out_fd and err_fd. */
hvds_result_t hvds__output_create(int np, const char* dir, int out_fd, int err_fd,
                                  hvds_output_t** out /* OUT */);
/* on 1: every forwarded line starts with the local time ("Mon Jan  2 15:04:05 2006"), as
 * horovodrun's --prefix-output-with-timestamp. Accepts NULL. */
void hvds__output_set_timestamps(hvds_output_t* o, int on);
/* Takes ownership of fd, a pipe read end carrying rank's stdout (is_err 0) or stderr (1). */
hvds_result_t hvds__output_add(hvds_output_t* o, int rank, int is_err, int fd);
/* Writes pollfd entries for the open pipes into pfds (at most max); returns how many. */
int hvds__output_pollfds(const hvds_output_t* o, struct pollfd* pfds, int max);
/* Reads from the pipes whose entries (as returned by hvds__output_pollfds) are ready, forwarding
 * whole lines; a pipe at EOF is closed after its partial last line is flushed. */
void hvds__output_handle(hvds_output_t* o, const struct pollfd* pfds, int n);
/* Number of pipes still open. */
int hvds__output_open(const hvds_output_t* o);
/* Flushes partial lines and closes every pipe and file. Accepts NULL. */
void hvds__output_destroy(hvds_output_t* o);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_OUTPUT_H_ */
