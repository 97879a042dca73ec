/*
 * fsync() wrapper for tests (tests/fsync_spy.h).
 */
#include "tests/fsync_spy.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#define SPY_DIRS_MAX 64

int __real_fsync(int fd);
int __wrap_fsync(int fd);

static pthread_mutex_t spy_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	dev_t dev;
	ino_t ino;
} spy_dirs[SPY_DIRS_MAX];
static uint32_t spy_count;

int __wrap_fsync(int fd)
{
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		pthread_mutex_lock(&spy_lock);
		if (spy_count < SPY_DIRS_MAX) {
			spy_dirs[spy_count].dev = st.st_dev;
			spy_dirs[spy_count].ino = st.st_ino;
			spy_count++;
		}
		pthread_mutex_unlock(&spy_lock);
	}
	return __real_fsync(fd);
}

void fsync_spy_reset(void)
{
	pthread_mutex_lock(&spy_lock);
	spy_count = 0;
	pthread_mutex_unlock(&spy_lock);
}

bool fsync_spy_dir_synced(const char *path)
{
	struct stat st;
	bool found = false;

	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return false;
	pthread_mutex_lock(&spy_lock);
	for (uint32_t i = 0; i < spy_count && !found; i++)
		found = spy_dirs[i].dev == st.st_dev && spy_dirs[i].ino == st.st_ino;
	pthread_mutex_unlock(&spy_lock);
	return found;
}
