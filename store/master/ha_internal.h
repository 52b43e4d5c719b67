/*
 * xfer-stored's leader election (--enable_ha, store/master/ha.c), on the
 * etcd backend (metadata/etcd_elect_internal.h): the master that creates
 * `mooncake-store/<cluster_id>/master_view` under its etcd lease leads,
 * the value its address `host:port` as clients connect to it. The others
 * follow the leader's journal (stream_internal.h) and campaign again
 * whenever the key goes away (its lease expired: the leader died) or
 * their stream ends. A leader that sees the key gone or another's, or
 * cannot confirm it with etcd for 3 TTLs, stops (exit 1): a standby may
 * lead by then. Only with WITH_ETCD (XFER_HAVE_ETCD).
 */
#ifndef XFER_STORED_HA_INTERNAL_H
#define XFER_STORED_HA_INTERNAL_H

#include <stdbool.h>

struct event_base;
struct ha;

#define HA_UNSYNCED_TTLS 3

struct ha_cfg {
	const char *endpoints;         /* --etcd_endpoints */
	const char *cluster_id;
	const char *self;              /* our "host:port" */
	int ttl_s;                     /* the lease's */
	/** We lead from now on (called once). @return 0, or -1 to stop. */
	int (*lead)(void *arg);
	/** Follow the leader at @p addr (called again when it changes, or
	 *  its stream should be made again). */
	void (*follow)(void *arg, const char *addr);
	/** Is our journal the last leader's (stream_synced())? One that is
	 *  not campaigns only HA_UNSYNCED_TTLS TTLs after the leader went,
	 *  if none that is took over. */
	bool (*synced)(void *arg);
	void *arg;
};

/** Start campaigning on @p base. @p cfg's self is copied; its
 *  endpoints and cluster_id must outlive the ha (the flags').
 *  @return it, or NULL with a message on stderr (a malformed
 *  --etcd_endpoints, no memory). */
struct ha *ha_new(struct event_base *base, const struct ha_cfg *cfg);

/** The stream from the leader ended: campaign again soon (20 ms,
 *  doubling to 400 ms while it goes on failing). @p dead: the leader's
 *  process is gone (stream_new()'s lost): its key is deleted if it
 *  still names it, rather than left for its lease to expire. */
void ha_leader_lost(struct ha *ha, bool dead);

/** Did we stop because leadership was lost? */
bool ha_failed(const struct ha *ha);

/** Give the key up if we hold it (a clean stop: a standby leads at
 *  once), then free (NULL is fine). Runs @p base briefly for that. */
void ha_free(struct ha *ha);

#endif
