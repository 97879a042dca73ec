/*
 * Hard-state slots (format and rules in hardstate.h).
 */
#include "storage/hardstate.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "hasp/errors.h"

LOG_TOPIC_DECLARE(storage);

enum { HS_OP_WRITE = 1, HS_OP_SYNC = 2 };

static uint64_t hs_user_data(uint16_t attempt, int kind)
{
	return (HARDSTATE_USER_DATA_OWNER << 56) | ((uint64_t)attempt << 8) | (uint64_t)kind;
}

void hardstate_slot_encode(uint8_t *slot, uint64_t seq, const struct hard_state *hs)
{
	memset(slot, 0, HARDSTATE_SLOT_SIZE);
	put_u64le(slot + 0, HARDSTATE_MAGIC);
	put_u16le(slot + 8, HARDSTATE_VERSION);
	put_u64le(slot + 16, seq);
	put_u64le(slot + 24, hs->term);
	put_u64le(slot + 32, hs->vote);
	put_u32le(slot + 44, crc32c(slot, 44));
}

int hardstate_slot_decode(const uint8_t *slot, uint64_t *seq, struct hard_state *hs)
{
	if (get_u64le(slot) != HARDSTATE_MAGIC)
		return -HASP_EMAGIC;
	if (get_u32le(slot + 44) != crc32c(slot, 44))
		return -HASP_ECORRUPT;
	if (get_u16le(slot + 8) != HARDSTATE_VERSION)
		return -HASP_EVERSION;
	*seq = get_u64le(slot + 16);
	hs->term = get_u64le(slot + 24);
	hs->vote = get_u64le(slot + 32);
	if (*seq == 0 || get_u16le(slot + 10) != 0 || get_u32le(slot + 12) != 0 ||
	    get_u32le(slot + 40) != 0)
		return -HASP_ECORRUPT;
	return 0;
}

int hardstate_open(struct hardstate *h, struct storage_io io, struct hard_state *loaded)
{
	uint8_t *image;
	size_t got = 0;
	uint32_t zero_slots = 0;
	int rc;

	memset(h, 0, sizeof(*h));
	h->io = io;
	h->fd = -1;
	h->buf = hasp_alloc_aligned(HARDSTATE_SLOT_SIZE, HARDSTATE_SLOT_SIZE);
	image = hasp_alloc_aligned(HARDSTATE_SLOT_SIZE, 2 * HARDSTATE_SLOT_SIZE);
	if (h->buf == NULL || image == NULL) {
		rc = -HASP_ENOMEM;
		goto fail;
	}
	memset(image, 0, 2 * HARDSTATE_SLOT_SIZE);
	rc = io.ops->open(io.ctx, HARDSTATE_FILE, STORAGE_OPEN_CREATE | STORAGE_OPEN_DIRECT, &h->fd,
			  &h->direct);
	if (rc == 0)
		rc = io.ops->pread(io.ctx, h->fd, image, 2 * HARDSTATE_SLOT_SIZE, 0, &got);
	if (rc == 0 && got < 2 * HARDSTATE_SLOT_SIZE) {
		/* New (or torn at creation): make both slots exist, durably.
		 * The caller checks that nothing else in the directory says the
		 * node voted before (storage_check_hard_state). */
		h->created = true;
		rc = io.ops->allocate(io.ctx, h->fd, 2 * HARDSTATE_SLOT_SIZE);
		if (rc == 0)
			rc = io.ops->fsync(io.ctx, h->fd);
		if (rc == 0)
			rc = io.ops->sync_dir(io.ctx);
	}
	if (rc != 0) {
		LOG_ERROR(storage, "hard state open failed file=%s err=%d (%s)", HARDSTATE_FILE, -rc,
			  strerror(-rc));
		rc = -HASP_EIO;
		goto fail;
	}
	for (uint32_t i = 0; i < 2; i++) {
		uint64_t seq;
		struct hard_state hs;
		const uint8_t *slot = image + i * HARDSTATE_SLOT_SIZE;
		bool zero = true;
		for (uint32_t k = 0; k < HARDSTATE_SLOT_SIZE && zero; k++)
			zero = slot[k] == 0;
		if (zero) {
			zero_slots++;
			continue;
		}
		int bad = hardstate_slot_decode(slot, &seq, &hs);
		if (bad != 0) {
			/* The record (48 bytes) sits in the slot's first 512-byte
			 * sector, which the disk writes whole or not at all, so a
			 * crash never leaves it half written: an invalid slot is
			 * damage. It may have held the newest vote, and falling
			 * back to the other slot could vote twice in one term. */
			LOG_ERROR(storage, "hard state file=%s slot at offset=%u is invalid (%s): the "
					   "newest term and vote cannot be proven; refusing to start "
					   "(docs/STORAGE.md, \"Hard state damage\")",
				  HARDSTATE_FILE, i * HARDSTATE_SLOT_SIZE, hasp_strerror(bad));
			h->invalid_slots++;
			rc = -HASP_ECORRUPT;
			goto fail;
		}
		if (seq > h->durable_seq) {
			h->durable_seq = seq;
			h->durable = hs;
			h->durable_slot = i;
		}
	}
	/* Only sequence 1 is ever alone on disk (the first save, or the one
	 * `haspctl snapshot restore` writes); the next save goes into the other
	 * slot, so a zeroed slot next to a later sequence was wiped, not never
	 * written. */
	if (zero_slots == 1 && h->durable_seq >= 2) {
		LOG_ERROR(storage, "hard state file=%s slot at offset=%u is zeroed next to sequence "
				   "%llu: the newest term and vote cannot be proven; refusing to start "
				   "(docs/STORAGE.md, \"Hard state damage\")",
			  HARDSTATE_FILE, (1u - h->durable_slot) * HARDSTATE_SLOT_SIZE,
			  (unsigned long long)h->durable_seq);
		h->invalid_slots++;
		rc = -HASP_ECORRUPT;
		goto fail;
	}
	h->saved_seq = h->durable_seq;
	*loaded = h->durable;
	hasp_free(image);
	return 0;

fail:
	hasp_free(image);
	hardstate_close(h);
	return rc;
}

void hardstate_close(struct hardstate *h)
{
	if (h->fd >= 0)
		h->io.ops->close(h->io.ctx, h->fd);
	hasp_free(h->buf);
	h->buf = NULL;
	h->fd = -1;
}

static void hs_fail(struct hardstate *h, const char *what, int res)
{
	if (!h->failed)
		LOG_ERROR(storage, "hard state %s failed file=%s offset=%u err=%d (%s); "
				   "durability stops",
			  what, HARDSTATE_FILE, (1u - h->durable_slot) * HARDSTATE_SLOT_SIZE, -res,
			  strerror(-res));
	h->failed = true;
	h->fail_code = res == -ENOSPC ? -HASP_ENOSPC : -HASP_EIO;
}

/* Writes the in-flight state into the slot not holding the durable one. */
static void hs_start(struct hardstate *h)
{
	uint32_t slot = 1u - h->durable_slot;
	int rc;

	h->attempt++;
	h->write_done = false;
	hardstate_slot_encode(h->buf, h->inflight_seq, &h->inflight_state);
	rc = h->io.ops->submit_write(h->io.ctx, h->fd, h->buf, HARDSTATE_SLOT_SIZE,
				     (uint64_t)slot * HARDSTATE_SLOT_SIZE, STORAGE_SUBMIT_LINK,
				     hs_user_data(h->attempt, HS_OP_WRITE));
	h->ops_pending += rc == 0;
	if (rc == 0) {
		rc = h->io.ops->submit_fsync(h->io.ctx, h->fd, 0, hs_user_data(h->attempt, HS_OP_SYNC));
		h->ops_pending += rc == 0;
	}
	if (rc == 0)
		rc = h->io.ops->submit(h->io.ctx);
	if (rc != 0 && rc != -EAGAIN && rc != -EBUSY)
		hs_fail(h, "submit", rc);
}

/* Starts the queued write once every op of the previous attempt is back
 * (the buffer is in use until then). */
static void hs_kick(struct hardstate *h)
{
	if (!h->failed && h->need_start && h->ops_pending == 0) {
		h->need_start = false;
		hs_start(h);
	}
}

int64_t hardstate_save(struct hardstate *h, const struct hard_state *hs)
{
	HASP_ASSERT(hs->term >= h->durable.term);
	HASP_ASSERT(hs->term >= h->pending_state.term);
	if (h->failed)
		return h->fail_code;
	uint64_t seq = ++h->saved_seq;
	if (h->inflight) {
		h->pending = true;
		h->pending_seq = seq;
		h->pending_state = *hs;
		return (int64_t)seq;
	}
	h->inflight = true;
	h->inflight_seq = seq;
	h->inflight_state = *hs;
	h->need_start = true;
	hs_kick(h);
	return (int64_t)seq;
}

void hardstate_io_done(struct hardstate *h, const struct storage_cqe *cqe)
{
	uint16_t attempt = (uint16_t)(cqe->user_data >> 8);
	int kind = (int)(cqe->user_data & 0xffu);

	HASP_ASSERT((cqe->user_data >> 56) == HARDSTATE_USER_DATA_OWNER);
	HASP_ASSERT(h->ops_pending > 0);
	h->ops_pending--;
	if (h->failed)
		return;
	if (attempt != h->attempt || !h->inflight || cqe->res == -ECANCELED) {
		hs_kick(h);
		return;
	}
	if (cqe->res == -EINTR || cqe->res == -EAGAIN ||
	    (kind == HS_OP_WRITE && cqe->res >= 0 && cqe->res < (int)HARDSTATE_SLOT_SIZE)) {
		/* Rewrite the whole slot (one block); the rest of this attempt
		 * is stale. */
		h->attempt++;
		h->need_start = true;
		hs_kick(h);
		return;
	}
	if (cqe->res < 0) {
		hs_fail(h, kind == HS_OP_WRITE ? "write" : "fdatasync", cqe->res);
		return;
	}
	if (kind == HS_OP_WRITE) {
		h->write_done = true;
		return;
	}
	if (!h->write_done)
		return;
	HASP_ASSERT(h->inflight_seq > h->durable_seq);
	h->durable_slot = 1u - h->durable_slot;
	h->durable_seq = h->inflight_seq;
	h->durable = h->inflight_state;
	h->inflight = false;
	if (h->pending) {
		h->pending = false;
		h->inflight = true;
		h->inflight_seq = h->pending_seq;
		h->inflight_state = h->pending_state;
		h->need_start = true;
	}
	hs_kick(h);
}
