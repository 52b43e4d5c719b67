/*
 * xfer-stored's /metrics (admin_internal.h): Prometheus' text format,
 * with the names of Mooncake's master (its master_metric_manager.cpp)
 * for what both count: gauges of space, keys and clients, the calls of
 * each kind (one key; batches with their items), evictions, discarded
 * puts. What only xfer has is named xfer_stored_*.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <event2/buffer.h>

#include "store/alloc_internal.h"
#include "store/master/admin_internal.h"
#include "store/master/state_internal.h"

/* Each kind of call: Mooncake's name for one key, for a batch (NULL: it
 * has none; batches then count per key), and what the call is called in
 * its help text. */
static const struct {
	unsigned type;
	const char *one, *batch, *what;
} calls[] = {
	{ STORE_PING, "master_ping", NULL, "Ping" },
	{ STORE_MOUNT, "master_mount_segment", NULL, "MountSegment" },
	{ STORE_UNMOUNT, "master_unmount_segment", NULL, "UnmountSegment" },
	{ STORE_PUT_START, "master_put_start", "master_batch_put_start",
	  "PutStart" },
	{ STORE_PUT_END, "master_put_end", "master_batch_put_end", "PutEnd" },
	{ STORE_PUT_REVOKE, "master_put_revoke", "master_batch_put_revoke",
	  "PutRevoke" },
	{ STORE_QUERY, "master_get_replica_list",
	  "master_batch_get_replica_list", "GetReplicaList" },
	{ STORE_EXIST, "master_exist_key", "master_batch_exist_key",
	  "ExistKey" },
	{ STORE_REMOVE, "master_remove", NULL, "Remove" },
	{ STORE_REMOVE_ALL, "master_remove_all", NULL, "RemoveAll" },
};

static int metric(struct evbuffer *out, const char *type, const char *name,
		  const char *suffix, const char *help, uint64_t v)
{
	return evbuffer_add_printf(out, "# HELP %s%s %s\n# TYPE %s%s %s\n"
				   "%s%s %" PRIu64 "\n", name, suffix, help,
				   name, suffix, type, name, suffix, v) < 0;
}

static int counter(struct evbuffer *out, const char *name,
		   const char *suffix, const char *help, uint64_t v)
{
	return metric(out, "counter", name, suffix, help, v);
}

static int gauge(struct evbuffer *out, const char *name, const char *help,
		 uint64_t v)
{
	return metric(out, "gauge", name, "", help, v);
}

static int seconds(struct evbuffer *out, const char *name, const char *help,
		   double v)
{
	return evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s gauge\n"
				   "%s %.6f\n", name, help, name, name, v) < 0;
}

static int call_metrics(struct evbuffer *out, const struct stored_stats *st)
{
	/* a batch's counters: suffix, help ("%s": the call), which */
	static const struct {
		const char *suffix, *help;
		size_t off;
	} batch[] = {
		{ "_requests_total", "Total number of Batch%s requests "
		  "received", offsetof(struct stored_count, batch) },
		{ "_failures_total", "Total number of failed Batch%s requests",
		  offsetof(struct stored_count, batch_fail) },
		{ "_partial_successes_total", "Total number of partially "
		  "successful Batch%s requests",
		  offsetof(struct stored_count, batch_partial) },
		{ "_items_total", "Total number of items processed in Batch%s "
		  "requests", offsetof(struct stored_count, items) },
		{ "_failed_items_total", "Total number of failed items in "
		  "Batch%s requests",
		  offsetof(struct stored_count, failed_items) },
	};
	char help[96];
	int failed = 0;

	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		const struct stored_count *n = &st->calls[calls[i].type];
		/* no batch form in Mooncake: a batch counts per key */
		uint64_t req = calls[i].batch ? n->req : n->req + n->items;
		uint64_t fail = calls[i].batch ? n->fail :
				n->fail + n->failed_items;

		snprintf(help, sizeof(help), "Total number of %s requests "
			 "received", calls[i].what);
		failed |= counter(out, calls[i].one, "_requests_total", help,
				  req);
		snprintf(help, sizeof(help), "Total number of failed %s "
			 "requests", calls[i].what);
		failed |= counter(out, calls[i].one, "_failures_total", help,
				  fail);
		for (size_t k = 0; calls[i].batch &&
		     k < sizeof(batch) / sizeof(batch[0]); k++) {
			snprintf(help, sizeof(help), batch[k].help,
				 calls[i].what);
			failed |= counter(out, calls[i].batch, batch[k].suffix,
					  help, *(const uint64_t *)
					  ((const char *)n + batch[k].off));
		}
	}
	return failed;
}

/* A segment's name as a label value: \, " and newline escaped. */
static int label(struct evbuffer *out, const char *p, size_t len)
{
	int failed = 0;

	for (size_t i = 0; i < len; i++) {
		if (p[i] == '\\' || p[i] == '"')
			failed |= evbuffer_add_printf(out, "\\%c", p[i]) < 0;
		else if (p[i] == '\n')
			failed |= evbuffer_add(out, "\\n", 2);
		else
			failed |= evbuffer_add(out, &p[i], 1);
	}
	return failed;
}

static int per_segment(struct evbuffer *out, struct stored *s, bool used)
{
	const char *name = used ? "segment_allocated_bytes" :
				  "segment_total_capacity_bytes";
	int failed = evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s gauge\n",
					 name, used ? "Total memory bytes "
					 "currently allocated of the segment" :
					 "Total memory capacity of the mounted "
					 "segment", name) < 0;

	for (size_t i = 0; i < s->nsegs; i++) {
		const struct segment *g = s->segs[i];

		failed |= evbuffer_add_printf(out, "%s{segment=\"", name) < 0;
		failed |= label(out, g->name, g->name_len);
		failed |= evbuffer_add_printf(out, "\"} %" PRIu64 "\n", used ?
					      store_alloc_used(g->alloc) :
					      g->size) < 0;
	}
	return failed;
}

int stored_metrics(struct stored *s, struct evbuffer *out)
{
	const struct stored_stats *st = &s->stats;
	size_t offline = 0;
	int failed = 0;

	for (struct list *l = s->offline.next; l != &s->offline; l = l->next)
		offline++;
	failed |= gauge(out, "master_allocated_bytes", "Total memory bytes "
			"currently allocated across all segments", s->used);
	failed |= gauge(out, "master_total_capacity_bytes", "Total memory "
			"capacity across all mounted segments", s->capacity);
	failed |= gauge(out, "master_nof_allocated_bytes", "Total bytes "
			"currently allocated across SSD segments", s->ssd_used);
	failed |= gauge(out, "master_total_nof_capacity_bytes", "Total "
			"capacity across mounted SSD segments",
			s->ssd_capacity);
	failed |= counter(out, "master_promotion_completed", "_total",
			  "Copies from SSD back to DRAM done", s->promoted);
	failed |= counter(out, "xfer_stored_offload_completed", "_total",
			  "Copies from DRAM to SSD done", s->offloaded);
	failed |= counter(out, "xfer_stored_repair_tasks", "_total",
			  "Replication tasks made for replicas lost with "
			  "their segment", s->repl_repairs);
	failed |= gauge(out, "xfer_stored_active_tasks", "Replication, "
			"copy and move tasks at work", s->repl_nactive);
	failed |= per_segment(out, s, true);
	failed |= per_segment(out, s, false);
	failed |= gauge(out, "master_key_count", "Total number of keys "
			"managed by the master", s->nobjects);
	failed |= gauge(out, "master_soft_pin_key_count", "Total number of "
			"soft-pinned keys managed by the master",
			st->soft_pinned);
	failed |= gauge(out, "master_active_clients", "Total number of "
			"active clients", s->nclients);
	failed |= call_metrics(out, st);
	failed |= counter(out, "master_put_start_alloc_failures_total", "",
			  "Total number of PutStart failures caused by "
			  "replica allocation failure", st->alloc_failures);
	failed |= counter(out, "master_successful_evictions_total", "",
			  "Total number of successful eviction operations",
			  st->evict_passes_ok);
	failed |= counter(out, "master_attempted_evictions_total", "",
			  "Total number of attempted eviction operations",
			  st->evict_passes);
	failed |= counter(out, "master_evicted_key_count", "",
			  "Total number of keys evicted", st->evicted);
	failed |= counter(out, "master_evicted_size_bytes", "",
			  "Total bytes of evicted objects", st->evicted_bytes);
	failed |= counter(out, "master_put_start_discard_cnt", "",
			  "Total number of discarded PutStart operations",
			  st->discarded);
	failed |= counter(out, "master_put_start_release_cnt", "",
			  "Total number of released PutStart operations",
			  st->released);
	failed |= gauge(out, "xfer_stored_offline_segments", "Segments "
			"restored from the journal, waiting to be mounted "
			"again", offline);
	failed |= counter(out, "xfer_stored_journal_commits_total", "",
			  "Journal transactions committed", st->commits);
	failed |= seconds(out, "xfer_stored_journal_commit_max_seconds",
			  "The longest journal commit (wall time)",
			  st->commit_max_s);
	failed |= seconds(out, "xfer_stored_evict_pass_max_seconds",
			  "The costliest eviction pass (CPU time): the "
			  "longest the loop waits on eviction",
			  st->evict_cpu_max_s);
	return failed ? -ENOMEM : 0;
}
