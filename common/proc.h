/* proc.h - whether a process on this machine is gone (liveness checks of
 * peers on the same host). Owns no state. */
#ifndef GX_COMMON_PROC_H
#define GX_COMMON_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/** True when `pid` has exited: no such process, or a zombie its parent has
 *  not reaped yet (gx-run reaps at once, an init that does not leaves one). */
bool gx_process_gone(pid_t pid);

#endif
