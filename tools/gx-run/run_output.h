/* run_output.h - gx-run's --tag-output: prefix each line a rank prints. */
#ifndef GX_RUN_OUTPUT_H
#define GX_RUN_OUTPUT_H

#include <stddef.h>

struct run_stream {
    int fd;          /* read end of the rank's pipe, -1 when closed */
    int out_fd;      /* where lines go: 1 or 2 */
    int rank;
    char buf[8192];
    size_t len;
};

/** Read what is available and write complete lines with a "[rank N] " prefix.
 *  Returns 0, or -1 at end of stream (fd closed, remainder flushed). */
int run_stream_pump(struct run_stream *s);
/** Write out any partial line left (at exit). */
void run_stream_flush(struct run_stream *s);

#endif
