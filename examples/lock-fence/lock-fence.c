/*
 * lock-fence: a service's use of libhasp, built OUTSIDE the hasp tree with
 * nothing but the installed library and pkg-config:
 *
 *     cc lock-fence.c $(pkg-config --cflags --libs hasp) -o lock-fence
 *     HASP_CLUSTER=10.77.0.11:7000,10.77.0.12:7000 ./lock-fence jobs/nightly 5000
 *
 * It takes a lock, does its "work" only while libhasp says the lease is
 * still safe, passes the fencing token to the guarded resource (here an
 * in-process hasp_fence, as a resource would keep one per lock), and
 * releases the lock with its token.
 *
 * Exit: 0 done, 1 the lock is busy or the cluster refused, 2 usage,
 * 3 no node answered.
 */
#include <hasp/client.h>
#include <hasp/fence.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	const char *cluster = getenv("HASP_CLUSTER");
	if (argc < 2 || argc > 3 || cluster == NULL) {
		fprintf(stderr, "usage: HASP_CLUSTER=ip:port,... lock-fence <lock> [ttl-ms]\n");
		return 2;
	}
	struct hasp_client_config cfg;
	hasp_client_config_default(&cfg);
	cfg.cluster = cluster;
	cfg.deadline_ms = 2000;
	struct hasp_client *client;
	int rc = hasp_client_open(&client, &cfg);
	if (rc != 0) {
		fprintf(stderr, "lock-fence: %s\n", hasp_strerror(rc));
		return 2;
	}

	struct hasp_acquire_opts opts = { .ttl_ms = argc == 3 ? (uint32_t)strtoul(argv[2], NULL, 10) : 5000 };
	struct hasp_lock lock;
	rc = hasp_client_acquire(client, argv[1], &opts, &lock);
	if (rc != 0) { /* -HASP_EBUSY: held by another; -HASP_ETIMEDOUT: no answer */
		fprintf(stderr, "lock-fence: acquire %s: %s\n", argv[1], hasp_strerror(rc));
		hasp_client_close(client);
		return rc == -HASP_ETIMEDOUT ? 3 : 1;
	}
	printf("granted %s token=%" PRIu64 "\n", lock.name, lock.token);

	/* The resource side: it admits an operation only with a token at least
	 * as large as any it has seen for this lock. */
	struct hasp_fence fence;
	hasp_fence_init(&fence);
	int status = 0;
	if (hasp_client_lock_safe(client, &lock, 100) && hasp_fence_admit(&fence, lock.token)) {
		printf("wrote with token %" PRIu64 "\n", lock.token);
	} else {
		fprintf(stderr, "lock-fence: the lease is no longer safe to use\n");
		status = 1;
	}

	rc = hasp_client_release(client, lock.name, lock.token);
	if (rc != 0) {
		fprintf(stderr, "lock-fence: release: %s\n", hasp_strerror(rc));
		status = 1;
	} else {
		printf("released\n");
	}
	hasp_client_close(client);
	return status;
}
