/*
 * libhasp-afpacket-nodefrag.so: preloaded into haspd by scripts/cluster
 * when its port is DPDK's net_af_packet (HASP_PORT=af_packet), so that IP
 * fragments reach the node as fragments, as they do on net_tap and on a
 * real NIC (docs/PERFORMANCE.md, "net_tap or net_af_packet").
 *
 * DPDK's net_af_packet (22.11, and no devarg turns it off) joins every
 * queue's socket to a PACKET_FANOUT group with PACKET_FANOUT_FLAG_DEFRAG:
 * the kernel then reassembles IPv4 fragments (ip_check_defrag) before the
 * PMD's ring sees them, and the node receives one oversized frame instead
 * of the fragments it must drop and count (docs/PROTOCOL.md "Transport").
 * A fanout group cannot be left or changed once joined, so the flag is
 * taken out of the setsockopt call itself; every other call, and every
 * other flag of this one, passes through unchanged.
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <string.h>
#include <sys/socket.h>

#ifndef SOL_PACKET
#define SOL_PACKET 263
#endif

typedef int setsockopt_fn(int fd, int level, int name, const void *value, socklen_t len);

int setsockopt(int fd, int level, int name, const void *value, socklen_t len)
{
	static setsockopt_fn *next;
	if (next == NULL) {
		next = (setsockopt_fn *)dlsym(RTLD_NEXT, "setsockopt");
		if (next == NULL) {
			errno = ENOSYS;
			return -1;
		}
	}
	if (level == SOL_PACKET && name == PACKET_FANOUT && value != NULL &&
	    len == sizeof(int)) {
		/* The argument: group id in the low 16 bits, type and flags
		 * in the high 16 (packet(7)). */
		int arg;
		memcpy(&arg, value, sizeof(arg));
		arg &= ~(PACKET_FANOUT_FLAG_DEFRAG << 16);
		return next(fd, level, name, &arg, len);
	}
	return next(fd, level, name, value, len);
}
