/*
 * More DRAM segments of the caller's memory for the store's client
 * (docs/STORE.md, "More segments"): Mooncake's MountSegment and
 * UnmountSegment. Part of <xfer/store.h>, which includes it; the
 * conventions are that header's.
 */
#ifndef XFER_KV_STORE_SEGMENTS_H
#define XFER_KV_STORE_SEGMENTS_H

#ifndef XFER_KV_STORE_H
#error "include <xfer/store.h>, not this header"
#endif

/**
 * Lend [@p addr, @p addr + @p len) of the caller's memory to the store as
 * one more DRAM segment (Mooncake's MountSegment): it is registered with
 * the engine for remote access (location "*") and mounted under the
 * engine's name with a segment id of its own, so the master allocates
 * replicas in it as in the client's own segment, and peers read and write
 * it alike. It is mounted again whenever the own segment is (a new
 * connection, a master that restarted or forgot the client), and
 * unmounted and unregistered by xfer_kv_unmount_segment() or
 * xfer_kv_free(). The memory stays the caller's: keep it until then.
 * @return 0; XFER_KV_INVALID_PARAMS (NULL @p addr, @p addr or @p len not
 *         a multiple of 64, @p len 0, a range that overlaps the client's
 *         own segment, its staging buffer or a segment mounted already,
 *         or one the engine refuses to register); XFER_KV_RPC_FAIL (no
 *         connection to the master now, or no answer within 11 s); an
 *         error of the master's (XFER_KV_SEGMENT_ALREADY_EXISTS ...);
 *         -EDEADLK (on the engine's callback base); -ENOMEM. On error
 *         nothing stays registered or mounted. Any other thread.
 */
XFER_EXPORT
int xfer_kv_mount_segment(struct xfer_kv *kv, void *addr, size_t len);

/**
 * Unmount a segment of xfer_kv_mount_segment(), given by the same
 * @p addr and @p len (Mooncake's UnmountSegment): the master drops the
 * replicas in it (objects with no other replica are gone; those asking
 * for more replicas are made again elsewhere), then its memory is
 * unregistered (waiting for peers' transfers in it to end).
 * @return 0 (also when the master no longer knew it);
 *         XFER_KV_INVALID_PARAMS (no such segment mounted);
 *         XFER_KV_RPC_FAIL (no connection to the master now, or no
 *         answer: it stays mounted); another error of the master's;
 *         -EDEADLK (on the engine's callback base); -ENOMEM. Any other
 *         thread.
 */
XFER_EXPORT
int xfer_kv_unmount_segment(struct xfer_kv *kv, void *addr, size_t len);

#endif
