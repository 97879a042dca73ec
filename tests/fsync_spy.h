/*
 * Which directories a test's code fsynced: the executable links with
 * -Wl,--wrap=fsync, so every fsync() of the code under test (static
 * libraries included) passes through fsync_spy.c, which notes the
 * directories among the synced fds and then syncs for real. A power cut
 * cannot be staged here; a missing directory fsync can be seen.
 */
#ifndef HASP_TESTS_FSYNC_SPY_H
#define HASP_TESTS_FSYNC_SPY_H

#include <stdbool.h>

/* Forgets the directories noted so far. */
void fsync_spy_reset(void);
/* True when the directory at `path` (same device and inode) was fsynced
 * since the last reset. */
bool fsync_spy_dir_synced(const char *path);

#endif
