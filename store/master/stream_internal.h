/*
 * The journal stream of an HA cluster (--enable_ha, store/master/ha.c):
 * the leader sends each commit of its journal to every standby that
 * follows it, after a copy of the whole journal when the standby
 * connects; a standby applies them to its own journal, commits, and says
 * which commit it holds. With --sync_standby the leader's answers wait
 * for that (stored_set_gate()). Wire: docs/PROTOCOL.md §7.4. One thread,
 * the master's event_base.
 */
#ifndef XFER_STORED_STREAM_INTERNAL_H
#define XFER_STORED_STREAM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

struct bufferevent;
struct event_base;
struct journal;
struct store_msg;
struct stored;
struct stream;

/** A stream over @p j (kept, not owned) on @p base; a standby proves
 *  @p auth (kept; NULL: none) to its leader. @p lost(@p arg, dead) runs
 *  when a standby's connection to its leader ends: @p dead when a leader
 *  whose stream ran before now refuses connections (its process is
 *  gone; a partition would time out instead). NULL: ENOMEM. */
struct xfer_auth;
struct stream *stream_new(struct event_base *base, struct journal *j,
			  const struct xfer_auth *auth,
			  void (*lost)(void *arg, bool dead), void *arg);

/** Close every connection (NULL is fine). */
void stream_free(struct stream *st);

/* ---- the standby ---- */

/** Follow the leader at @p addr ("host:port", numeric host), after
 *  dropping any stream from another (and the changes of a commit only
 *  partly received). @return 0, -EINVAL (@p addr), -ENOMEM; a leader
 *  out of reach is lost() later. */
int stream_follow(struct stream *st, const char *addr);

/** Stop following (a standby about to lead). */
void stream_unfollow(struct stream *st);

/** Is our journal the last leader's, as of when its stream ended (its
 *  copy and every commit it sent since)? A standby that is not should
 *  let one that is lead. */
bool stream_synced(const struct stream *st);

/* ---- the leader ---- */

/** Lead: tap the journal, and with @p sync hold @p state's answers until
 *  every standby following (one at least) has their commit. */
void stream_lead(struct stream *st, struct stored *state, bool sync);

/** A standby asked for the stream (conn_internal.h's stored_follow_cb). */
void stream_adopt(void *arg, struct bufferevent *bev,
		  const struct store_msg *req);

#endif
