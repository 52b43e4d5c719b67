/*
 * The election (ha_internal.h). States: a candidate campaigns (one etcd
 * transaction: create the key under our lease if absent, else read its
 * holder); the loser follows the holder; the winner leads. A watch on
 * the cluster's prefix says when the key changes; a timer every
 * TTL/4 covers a watch that missed it, and has the leader confirm its
 * key: seen gone or another's, or not confirmed for 3 TTLs (etcd out of
 * reach: our lease may be gone), it stops the master.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "metadata/etcd_elect_internal.h"
#include "store/master/ha_internal.h"
#include "util/log_internal.h"

#define RETRY_MIN_MS 20            /* following again after a loss */
#define RETRY_MAX_MS 400
#define STEP_DOWN_TTLS 3

enum role { CANDIDATE, STANDBY, LEADER };

struct ha {
	struct event_base *base;
	struct ha_cfg cfg;
	struct xfer_store *etcd;
	struct xfer_store_env env;
	char prefix[300], key[320];
	char self[300];                /* cfg.self's copy: the caller's may
					  be on its stack */
	enum role role;
	char leader[300];              /* followed, as a standby */
	bool asking;                   /* a campaign or check in flight */
	bool again;                    /* ask once more when it ends */
	bool failed;
	bool seen;                     /* a leader was seen: a campaign needs
					  our journal synced, or time */
	int64_t confirmed_ms;          /* the leader's key last seen ours */
	int64_t lost_ms;               /* when the leader was last lost */
	int retry_ms;                  /* to follow again after a loss */
	struct event *tick, *retry;
};

static void ask(struct ha *ha);

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void step_down(struct ha *ha, const char *why)
{
	xfer_log(XFER_LOG_ERROR, "xfer-stored: no longer the leader (%s): "
		 "stopping", why);
	ha->failed = true;
	event_base_loopbreak(ha->base);
}

static void asked(struct ha *ha)
{
	ha->asking = false;
	if (ha->again) {
		ha->again = false;
		ask(ha);
	}
}

static void campaigned(int err, const char *value, size_t len, void *arg)
{
	struct ha *ha = arg;

	if (ha->role == LEADER) {
		asked(ha);
		return;
	}
	if (err == -EEXIST)
		ha->seen = true;
	if (!err) {
		ha->role = LEADER;
		ha->confirmed_ms = now_ms();
		xfer_log(XFER_LOG_INFO, "xfer-stored: leading, as %s",
			 ha->cfg.self);
		if (ha->cfg.lead(ha->cfg.arg)) {
			ha->failed = true;
			event_base_loopbreak(ha->base);
			return;
		}
	} else if (err == -EEXIST && len && len < sizeof(ha->leader) &&
		   (len != strlen(ha->cfg.self) ||
		    memcmp(value, ha->cfg.self, len))) {
		/* (our own address: a key of ours from before a restart,
		 * waiting for its lease to expire) */
		bool moved = strlen(ha->leader) != len ||
			     memcmp(ha->leader, value, len);

		if (moved) {
			memcpy(ha->leader, value, len);
			ha->leader[len] = 0;
			ha->retry_ms = RETRY_MIN_MS;
		}
		if (moved || ha->role != STANDBY) {
			ha->role = STANDBY;
			xfer_log(XFER_LOG_INFO, "xfer-stored: standby of %s",
				 ha->leader);
			ha->cfg.follow(ha->cfg.arg, ha->leader);
		}
	} else if (err != -EEXIST) {
		xfer_log(XFER_LOG_DEBUG, "xfer-stored: campaign: %s",
			 strerror(-err));
	}
	asked(ha);
}

/* The leader's check of its key. */
static void checked(int err, const char *value, size_t len, void *arg)
{
	struct ha *ha = arg;

	if (!err && len == strlen(ha->cfg.self) &&
	    !memcmp(value, ha->cfg.self, len))
		ha->confirmed_ms = now_ms();
	else if (!err || err == -ENOENT)
		step_down(ha, err ? "the key expired" : "another holds it");
	asked(ha);
}

/* A look at the key without campaigning: its holder is followed. */
static void looked(int err, const char *value, size_t len, void *arg)
{
	campaigned(err ? err : -EEXIST, value, len, arg);
}

/* May we campaign? Not with a journal behind the last leader's while a
 * standby that has it may take over. */
static bool may_campaign(const struct ha *ha)
{
	return !ha->seen || ha->cfg.synced(ha->cfg.arg) ||
	       now_ms() - ha->lost_ms > HA_UNSYNCED_TTLS * 1000 * ha->cfg.ttl_s;
}

static void ask(struct ha *ha)
{
	if (ha->asking) {
		ha->again = true;
		return;
	}
	ha->asking = true;
	if (ha->role == LEADER)
		ha->etcd->ops->get(ha->etcd, ha->key, checked, ha);
	else if (may_campaign(ha))
		xfer_etcd_campaign(ha->etcd, ha->key, ha->cfg.self,
				   strlen(ha->cfg.self), campaigned, ha);
	else
		ha->etcd->ops->get(ha->etcd, ha->key, looked, ha);
}

static void on_changed(const char *key, void *arg)
{
	struct ha *ha = arg;

	if (!key || !strcmp(key, ha->key))
		ask(ha);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	ask(arg);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct ha *ha = arg;

	(void)fd;
	(void)what;
	/* etcd extends leases over its own elections: only an outage of
	 * a few TTLs says ours may be gone (--sync_standby keeps answers
	 * safe meanwhile: standbys that moved on stop acknowledging) */
	if (ha->role == LEADER &&
	    now_ms() - ha->confirmed_ms > STEP_DOWN_TTLS * 1000 *
					  ha->cfg.ttl_s) {
		step_down(ha, "etcd did not confirm it for 3 TTLs");
		return;
	}
	ask(ha);
}

struct ha *ha_new(struct event_base *base, const struct ha_cfg *cfg)
{
	struct timeval tv = { 0, cfg->ttl_s * 1000000 / 4 };
	struct ha *ha = calloc(1, sizeof(*ha));
	size_t n;

	if (!ha) {
		fprintf(stderr, "xfer-stored: out of memory\n");
		return NULL;
	}
	tv.tv_sec = tv.tv_usec / 1000000;
	tv.tv_usec %= 1000000;
	ha->base = base;
	ha->cfg = *cfg;
	snprintf(ha->self, sizeof(ha->self), "%s", cfg->self);
	ha->cfg.self = ha->self;
	ha->lost_ms = now_ms();        /* a restarted master is behind */
	/* Mooncake's: one '/' that ends the id is dropped */
	n = strlen(cfg->cluster_id);
	n -= n && cfg->cluster_id[n - 1] == '/';
	snprintf(ha->prefix, sizeof(ha->prefix), "mooncake-store/%.*s/",
		 (int)n, cfg->cluster_id);
	snprintf(ha->key, sizeof(ha->key), "%smaster_view", ha->prefix);
	ha->env = (struct xfer_store_env){
		.base = base, .prefix = ha->prefix, .changed = on_changed,
		.arg = ha,
	};
	ha->retry_ms = RETRY_MIN_MS;
	ha->tick = event_new(base, -1, EV_PERSIST, on_tick, ha);
	ha->retry = evtimer_new(base, on_retry, ha);
	if (!ha->tick || !ha->retry || event_add(ha->tick, &tv)) {
		fprintf(stderr, "xfer-stored: out of memory\n");
		goto err;
	}
	if (xfer_etcd_elect_open(cfg->endpoints, &ha->env, cfg->ttl_s,
				 &ha->etcd)) {
		fprintf(stderr, "xfer-stored: --etcd_endpoints '%s' is not "
			"etcd://host:port[,host:port]...\n", cfg->endpoints);
		goto err;
	}
	ask(ha);
	return ha;
err:
	if (ha->tick)
		event_free(ha->tick);
	if (ha->retry)
		event_free(ha->retry);
	free(ha);
	return NULL;
}

static void deposed(int err, const char *value, size_t len, void *arg)
{
	struct ha *ha = arg;

	(void)value;
	(void)len;
	if (!err)
		ask(ha);
}

void ha_leader_lost(struct ha *ha, bool dead)
{
	struct timeval tv = { 0, ha->retry_ms * 1000 };

	if (dead && ha->leader[0]) {
		xfer_log(XFER_LOG_WARN, "xfer-stored: the leader %s is gone: "
			 "deleting its key", ha->leader);
		xfer_etcd_depose(ha->etcd, ha->key, ha->leader,
				 strlen(ha->leader), deposed, ha);
	}
	/* soon (a new leader may not listen yet), but backing off while a
	 * dead leader's key lives; the watch says at once when it goes */
	ha->role = CANDIDATE;
	ha->lost_ms = now_ms();
	evtimer_add(ha->retry, &tv);
	if (ha->retry_ms < RETRY_MAX_MS)
		ha->retry_ms *= 2;
}

bool ha_failed(const struct ha *ha)
{
	return ha->failed;
}

static void gave_up(int err, const char *value, size_t len, void *arg)
{
	struct ha *ha = arg;

	(void)err;
	(void)value;
	(void)len;
	event_base_loopbreak(ha->base);
}

void ha_free(struct ha *ha)
{
	struct timeval tv = { 1, 0 };

	if (!ha)
		return;
	event_free(ha->tick);
	event_free(ha->retry);
	if (ha->role == LEADER && !ha->failed) {
		ha->etcd->ops->del(ha->etcd, ha->key, gave_up, ha);
		event_base_loopexit(ha->base, &tv);
		event_base_dispatch(ha->base);
	}
	ha->etcd->ops->close(ha->etcd);
	free(ha);
}
