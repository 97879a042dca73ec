/*
 * Making a new or renamed file's name durable: fsync of the directory that
 * holds it (a rename or create is in the directory, not the file). Shared
 * by storage/ (the data dir, WAL segments, snapshots) and haspctl
 * (`snapshot save` backups).
 */
#ifndef HASP_COMMON_DIRSYNC_H
#define HASP_COMMON_DIRSYNC_H

/* fsyncs the directory that contains `path` ("a/b" -> "a", "b" -> ".",
 * "/b" -> "/"). Returns 0 or -errno. */
int dirsync_parent(const char *path) __attribute__((warn_unused_result));

#endif
