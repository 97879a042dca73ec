/*
 * The forbidden-thread window for tests of code that runs on the lcore
 * (docs/STYLE.md §6: after start, the lcore allocates nothing).
 *
 * A test opens the window with forbid_io_window(true) once its nodes have
 * started, and brackets each call into a node entry point (node_peer_rx,
 * node_client_rx, node_work, node_admin_work) with forbid_io_enter() and
 * forbid_io_leave(); inside, the thread is marked with
 * hasp_alloc_forbid_thread(), so any hasp_alloc() there bumps the
 * forbidden counter the test then requires to be unchanged. Start-up
 * (node_init) and shutdown stay outside: in haspd they happen before
 * node_start() and after the loop.
 *
 * forbid_io_wrap() wraps a storage_io (the simulated disk) so that each
 * call into it lifts the mark and restores it on return: the simulated disk
 * stands in for the kernel, and its own memory (file images, copies of
 * queued writes) is not the lcore's heap. A list callback is the caller's
 * code and runs marked again. One thread, one window (tests are
 * single-threaded).
 */
#ifndef HASP_TESTS_STORAGE_FORBID_IO_H
#define HASP_TESTS_STORAGE_FORBID_IO_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/io.h"

/* Opens (true) or closes (false) the window. */
void forbid_io_window(bool open);
/* Marks the thread if the window is open; leave always unmarks. */
void forbid_io_enter(void);
void forbid_io_leave(void);
/* Where the build allows (not under sanitizers), malloc/calloc/realloc are
 * replaced in the test binary by counting ones, so libc allocations on a
 * marked thread (opendir, stdio, qsort) are counted too:
 * forbid_io_libc_count() is their total; forbid_io_libc_counted() says
 * whether this build counts them. */
bool forbid_io_libc_counted(void);
uint64_t forbid_io_libc_count(void);

/* Returns io with its ops replaced by lifting wrappers; io.ctx is kept.
 * Every wrapped io must share one ops table (the simulated disk's). */
struct storage_io forbid_io_wrap(struct storage_io io);

#endif
