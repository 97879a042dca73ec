/*
 * Directory fsync for durable names (common/dirsync.h).
 */
#include "common/dirsync.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int dirsync_parent(const char *path)
{
	char parent[4096];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(parent))
		return -EINVAL;
	memcpy(parent, path, len + 1);
	while (len > 1 && parent[len - 1] == '/')
		parent[--len] = 0; /* "a/b/" names b */
	char *slash = strrchr(parent, '/');
	if (slash == NULL)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == parent)
		parent[1] = 0; /* "/b": the root */
	else
		*slash = 0;
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) == 0 ? 0 : -errno;
	close(fd);
	return rc;
}
