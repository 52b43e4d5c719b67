/*
 * xfer-stored's --enable_ha against a real etcd: masters as real
 * processes elect a leader under mooncake-store/<cluster_id>/master_view,
 * clients given etcd:// find it; the leader stopped cleanly gives the key
 * up and a standby leads at once with the objects it had; with
 * --sync_standby, the leader SIGKILLed under writer processes is
 * replaced, puts succeed again within 3 s, and every put acknowledged
 * before any kill is read back with its bytes; a hung leader, a secret,
 * etcd's own leader lost (three members), a hostile standby; a striped
 * object's shards the same after a handover. Flags it
 * needs are refused by name. $XFER_TEST_HA_KILLS sets the number of kills (3; the
 * report's figures come from 20); $XFER_TEST_WRAP runs the masters behind
 * a command (valgrind: with XFER_TEST_HA_TTL=6, their lease's TTL);
 * $XFER_TEST_STORED_LOG keeps their output.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "include/xfer/store.h"
#include "test/helpers.h"
#include "test/th_etcd.h"
#include "test/th_store.h"
#include "store/proto_internal.h"

#define MASTERS 3
#define WRITERS 2
#define NKEYS 4000               /* per writer: well inside its segment */
#define LEN 4096
#define SEG (32u << 20)
#define STAGE (1u << 20)
#define FAILOVER_MS 3000         /* the target */
/* a hung leader: its lease's TTL, etcd's expiry check (every 500 ms),
 * then as above; under load on a shared machine */
#define HUNG_MS (ttl_s * 1000 + 2500)
/* etcd's leader lost: its election (1 s timeout), our requests moving to
 * another member, a leader that may step down meanwhile */
#define ETCD_OUTAGE_MS 8000

static char dir[] = "/tmp/it_etcd_store_ha.XXXXXX";
static char cluster[48];

struct master {
	pid_t pid;
	uint16_t port;
	char journal[128];
};
static struct master ms[MASTERS];
static bool sync_standby;
static const char *extra_flag;   /* one more flag of the masters, or NULL */
/* the masters' --ha_lease_ttl: $XFER_TEST_HA_TTL (valgrind's slowness
 * can starve a 2 s lease's keepalives), else the default */
static int ttl_s = 2;

/* What writers share with the test (MAP_SHARED). */
struct shared {
	volatile int stop;
	volatile int64_t last_ok_ms[WRITERS];
	volatile int64_t acked_n[WRITERS], fails[WRITERS];
	volatile uint8_t acked[WRITERS][NKEYS];
};
static struct shared *sh;

static void key_of(char *buf, size_t len, int w, int i)
{
	snprintf(buf, len, "%s-w%d-%d", cluster, w, i);
}

/* Master @p i, behind the command in $XFER_TEST_WRAP if set (words
 * split at spaces: XFER_TEST_WRAP="valgrind -q --error-exitcode=9"). */
static void master_start(int i)
{
	char flags[6][256], wrap[256];
	const char *argv[24], *w = getenv("XFER_TEST_WRAP");
	int n = 0;

	snprintf(wrap, sizeof(wrap), "%s", w ? w : "");
	for (char *t = strtok(wrap, " "); t && n < 8; t = strtok(NULL, " "))
		argv[n++] = t;

	snprintf(flags[0], sizeof(flags[0]), "--port=%u", ms[i].port);
	snprintf(flags[1], sizeof(flags[1]), "--etcd_endpoints=%s",
		 th_cluster.conn);
	snprintf(flags[2], sizeof(flags[2]), "--journal=%s", ms[i].journal);
	snprintf(flags[3], sizeof(flags[3]), "--cluster_id=%s", cluster);
	snprintf(flags[4], sizeof(flags[4]), "--ha_lease_ttl=%d", ttl_s);
	argv[n++] = th_stored_path();
	for (int k = 0; k < 5; k++)
		argv[n++] = flags[k];
	argv[n++] = "--enable_ha";
	argv[n++] = "--rpc_address=127.0.0.1";
	argv[n++] = "--metrics_port=0";
	if (sync_standby)
		argv[n++] = "--sync_standby";
	if (extra_flag)
		argv[n++] = extra_flag;
	argv[n] = NULL;
	ms[i].pid = fork();
	assert_true(ms[i].pid >= 0);
	if (!ms[i].pid) {
		const char *log = getenv("XFER_TEST_STORED_LOG");
		int fd = open(log ? log : "/dev/null",
			      O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execvp(argv[0], (char **)argv);
		_exit(127);
	}
}

/* The master that serves (only a leader listens), within @p ms_max; -1
 * if none does. */
static int leader(int ms_max)
{
	int64_t end = th_now_ms() + ms_max;

	do {
		for (int i = 0; i < MASTERS; i++) {
			int fd;

			if (!ms[i].pid || (fd = th_connect_try(ms[i].port)) < 0)
				continue;
			close(fd);
			return i;
		}
		usleep(10000);
	} while (th_now_ms() < end);
	return -1;
}

/* @p n masters on fresh journals, for cluster @p name. */
static void cluster_start(const char *name, int n, bool sync)
{
	snprintf(cluster, sizeof(cluster), "%s-%d", name, (int)getpid());
	setenv("MC_STORE_CLUSTER_ID", cluster, 1);
	sync_standby = sync;
	memset(ms, 0, sizeof(ms));
	for (int i = 0; i < n; i++) {
		ms[i].port = th_free_port();
		snprintf(ms[i].journal, sizeof(ms[i].journal), "%s/%s-%d.db",
			 dir, name, i);
		master_start(i);
	}
	/* the clients' master address: etcd */
	if (strlen(th_cluster.conn) < sizeof(th_master.addr))
		memcpy(th_master.addr, th_cluster.conn,
		       strlen(th_cluster.conn) + 1);
	assert_int_not_equal(leader(30000), -1);
}

static void cluster_stop(void)
{
	for (int i = 0; i < MASTERS; i++)
		if (ms[i].pid) {
			th_kill(ms[i].pid);
			ms[i].pid = 0;
		}
}

static void kill_master(int i)
{
	th_kill(ms[i].pid);
	ms[i].pid = 0;
}

/* ---- tests ---- */

static void test_refused(void **state)
{
	static const char *const bad[][5] = {
		{ "--enable_ha", "--journal=/tmp/x.db",
		  "--rpc_address=127.0.0.1", NULL },       /* no etcd */
		{ "--enable_ha", "--etcd_endpoints=127.0.0.1:1",
		  "--rpc_address=127.0.0.1", NULL },       /* no journal */
		{ "--enable_ha", "--etcd_endpoints=127.0.0.1:1",
		  "--journal=/tmp/x.db", NULL },           /* 0.0.0.0 */
		{ "--sync_standby", NULL },                /* no HA */
		{ "--enable_ha", "--ha_backend_type=redis",
		  "--ha_backend_connstring=127.0.0.1:1", NULL },
	};

	(void)state;
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		const char *argv[6] = { th_stored_path() };
		pid_t pid;
		int n = 1;

		for (int j = 0; bad[k][j]; j++)
			argv[n++] = bad[k][j];
		pid = fork();
		assert_true(pid >= 0);
		if (!pid) {
			int null = open("/dev/null", O_WRONLY);

			dup2(null, 2);
			execv(argv[0], (char **)argv);
			_exit(127);
		}
		assert_int_equal(th_wait_exit(pid, 5000), 2 << 8);
	}
}

/* The value of etcd key @p key, decoded, into @p buf (@p cap bytes). */
static void etcd_value(const char *key, char *buf, size_t cap)
{
	static const char *kvs_path[] = { "kvs", NULL };
	static const char *value_path[] = { "value", NULL };
	yajl_val v = th_etcdctl(&th_cluster, "get %s -w json", key), kvs;
	const char *b64;
	int n;

	assert_non_null(v);
	kvs = yajl_tree_get(v, kvs_path, yajl_t_array);
	assert_true(kvs && YAJL_GET_ARRAY(kvs)->len == 1);
	b64 = YAJL_GET_STRING(yajl_tree_get(YAJL_GET_ARRAY(kvs)->values[0],
					    value_path, yajl_t_string));
	assert_true(b64 && strlen(b64) / 4 * 3 < cap);
	n = EVP_DecodeBlock((unsigned char *)buf, (const unsigned char *)b64,
			    (int)strlen(b64));
	assert_true(n >= 0);
	while (n > 0 && !buf[n - 1])   /* the padding's zeros */
		n--;
	buf[n] = 0;
	yajl_tree_free(v);
}

/* One leader, the key holds its address under a lease, a client finds
 * it, the others do not listen; stopped cleanly, it gives the key up and
 * a standby leads at once, serving the objects the first one had (the
 * client mounts its segment there), its versions going on. Synced, so
 * the standbys have all (a slow run, valgrind, too). */
static void test_elect_and_handover(void **state)
{
	char want[64], key[128], got[128];
	struct xfer_kv *kv;
	int l, l2;
	int64_t t0, ret, v1;

	(void)state;
	cluster_start("handover", MASTERS, true);
	l = leader(0);
	snprintf(want, sizeof(want), "127.0.0.1:%u", ms[l].port);
	snprintf(key, sizeof(key), "mooncake-store/%s/master_view", cluster);
	etcd_value(key, got, sizeof(got));
	assert_string_equal(got, want);
	assert_true(th_etcd_key_lease(&th_cluster, key) > 0);
	for (int i = 0; i < MASTERS; i++)
		if (i != l)
			assert_true(th_connect_try(ms[i].port) < 0);

	kv = th_kv(SEG, STAGE);
	assert_int_equal(th_put_pattern(kv, "a", LEN, 1, 1, false), 0);
	/* the last version given held by no object any more */
	assert_int_equal(th_put_pattern(kv, "x", LEN, 1, 1, false), 0);
	assert_int_equal(xfer_kv_remove(kv, "x", true), 0);
	v1 = xfer_kv_sync(kv);
	assert_true(v1 >= 2);
	th_stored_stop(ms[l].pid);
	ms[l].pid = 0;
	t0 = th_now_ms();
	l2 = leader(5000);
	assert_true(l2 >= 0 && l2 != l);
	/* the key was given up: far quicker than its lease's TTL */
	assert_true(th_now_ms() - t0 < 1500);
	do {
		usleep(20000);
		ret = th_get_pattern(kv, "a", LEN, 1, false);
	} while (ret != LEN && th_now_ms() - t0 < 5000);
	assert_int_equal(ret, LEN);
	assert_int_equal(th_put_pattern(kv, "b", LEN, 1, 1, false), 0);
	/* versions go on past the last the old leader gave */
	assert_true(xfer_kv_sync(kv) > v1);
	assert_int_equal(xfer_kv_free(kv), 0);
	cluster_stop();
}

/* With --sync_standby, a put is not answered while no standby follows;
 * once one is back (and has the leader's journal), it is. */
static void test_sync_waits_for_standby(void **state)
{
	struct th_sizes sz = { SEG, STAGE };
	char name[64], line[32];
	struct th_proc p;
	int l;

	(void)state;
	cluster_start("wait", 2, true);
	l = leader(0);
	th_kv_proc_start(&p, &sz, name);
	assert_int_equal(th_kv_cmd(&p, "put k1 %d 1", LEN), 0);
	kill_master(!l);
	assert_int_equal(th_line_send(p.to, "put k2 4096 1"), 0);
	assert_int_equal(th_line_recv(p.from, line, sizeof(line), 1500), -1);
	master_start(!l);
	assert_true(th_line_recv(p.from, line, sizeof(line), 10000) > 0);
	assert_string_equal(line, "0");
	assert_int_equal(th_kv_cmd(&p, "get k2 %d 1", LEN), LEN);
	th_kv_proc_stop(&p);
	cluster_stop();
}

/* A leader that hangs (SIGSTOP: its connections are not refused) is
 * replaced once its lease (2 s) expires, and the client moves, within
 * HUNG_MS; resumed, it finds the key another's and stops (exit 1). */
static void test_stopped_leader(void **state)
{
	struct xfer_kv *kv;
	int64_t t0, dt, ret;
	int l;

	(void)state;
	/* synced: "a" is acknowledged once both standbys have it all
	 * (and the new leader has one to hold answers for) */
	cluster_start("stopped", 3, true);
	l = leader(0);
	kv = th_kv(SEG, STAGE);
	assert_int_equal(th_put_pattern(kv, "a", LEN, 1, 1, false), 0);
	kill(ms[l].pid, SIGSTOP);
	t0 = th_now_ms();
	do {
		usleep(20000);
		ret = th_put_pattern(kv, "b", LEN, 1, 1, false);
	} while (ret && th_now_ms() - t0 < 15000);
	dt = th_now_ms() - t0;
	print_message("  a hung leader replaced: puts back after %lld ms\n",
		      (long long)dt);
	assert_int_equal(ret, 0);
	assert_true(dt < HUNG_MS);
	assert_int_equal(th_get_pattern(kv, "a", LEN, 1, false), LEN);
	kill(ms[l].pid, SIGCONT);
	assert_int_equal(th_wait_exit(ms[l].pid, 5000), 1 << 8);
	ms[l].pid = 0;
	assert_int_equal(xfer_kv_free(kv), 0);
	cluster_stop();
}

/* With a cluster secret (masters and clients from $XFER_AUTH_SECRET),
 * a standby proves it to follow: with --sync_standby a put is answered,
 * and is there once the leader is killed. */
static void test_secret(void **state)
{
	struct xfer_kv *kv;
	int64_t t0, ret;
	int l;

	(void)state;
	setenv("XFER_AUTH_SECRET", "it-etcd-store-ha", 1);
	cluster_start("secret", 3, true);
	l = leader(0);
	kv = th_kv(SEG, STAGE);
	assert_int_equal(th_put_pattern(kv, "s", LEN, 1, 1, false), 0);
	kill_master(l);
	t0 = th_now_ms();
	do {
		usleep(20000);
		ret = th_get_pattern(kv, "s", LEN, 1, false);
	} while (ret != LEN && th_now_ms() - t0 < 10000);
	assert_int_equal(ret, LEN);
	assert_int_equal(xfer_kv_free(kv), 0);
	cluster_stop();
	unsetenv("XFER_AUTH_SECRET");
}

/* A connection to the leader that asks for the journal stream: its fd,
 * the reply and the copy's first records read. */
static int fake_standby(int l)
{
	struct store_msg *m = calloc(1, sizeof(*m));
	struct store_buf b = { 0 };
	uint8_t buf[64];
	int fd = th_connect(ms[l].port);

	assert_non_null(m);
	m->h.type = STORE_HA_FOLLOW;
	assert_int_equal(store_msg_encode(&b, m), 0);
	assert_int_equal(th_send_all(fd, b.p, b.len), 0);
	/* the reply (16 + 4 bytes), then 'S' (4 + 1) at least */
	assert_true(th_recv_all(fd, buf, 25, 5000) == 25);
	assert_int_equal(buf[4], STORE_HA_FOLLOW);
	assert_int_equal(buf[24], 'S');
	store_buf_free(&b);
	free(m);
	return fd;
}

/* A standby that acknowledges a commit never sent has its stream
 * closed; the leader serves on. A master that takes no standby closes
 * ha_follow's connection. */
static void test_hostile_standby(void **state)
{
	uint8_t ack[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f };
	char buf[256];
	struct xfer_kv *kv;
	pid_t plain;
	uint16_t port;
	int fd, l;

	(void)state;
	cluster_start("hostile", 2, false);
	l = leader(0);
	fd = fake_standby(l);
	assert_int_equal(th_send_all(fd, ack, sizeof(ack)), 0);
	assert_true(th_recv_until_close(fd, buf, sizeof(buf), 5000) >= 0);
	close(fd);
	kv = th_kv(SEG, STAGE);
	assert_int_equal(th_put_pattern(kv, "h", LEN, 1, 1, false), 0);
	assert_int_equal(xfer_kv_free(kv), 0);
	cluster_stop();

	plain = th_stored_start(NULL, 0, &port);
	ms[0] = (struct master){ .pid = plain, .port = port };
	fd = th_connect(port);
	{
		struct store_msg *m = calloc(1, sizeof(*m));
		struct store_buf b = { 0 };

		assert_non_null(m);
		m->h.type = STORE_HA_FOLLOW;
		assert_int_equal(store_msg_encode(&b, m), 0);
		assert_int_equal(th_send_all(fd, b.p, b.len), 0);
		store_buf_free(&b);
		free(m);
	}
	/* closed, nothing answered */
	assert_int_equal(th_recv_until_close(fd, buf, sizeof(buf), 5000), 0);
	close(fd);
	cluster_stop();
}

static int writer(int in, int out, void *arg)
{
	int w = (int)(intptr_t)arg;
	struct xfer_kv *kv = th_kv_try(SEG, STAGE);
	char key[96], line[16];

	(void)out;
	if (!kv) {
		fprintf(stderr, "writer %d: no client: %s\n", w,
			strerror(errno));
		return 1;
	}
	for (int i = 0; i < NKEYS && !sh->stop; i++) {
		key_of(key, sizeof(key), w, i);
		if (th_put_pattern(kv, key, LEN, 1, 1, false)) {
			sh->fails[w]++;
			usleep(10000);
			continue;
		}
		sh->acked[w][i] = 1;
		sh->acked_n[w]++;
		sh->last_ok_ms[w] = th_now_ms();
	}
	/* its segment holds its objects: serve them until told */
	th_line_recv(in, line, sizeof(line), 300000);
	return xfer_kv_free(kv) ? 2 : 0;
}

static int64_t acked_total(void)
{
	int64_t n = 0;

	for (int w = 0; w < WRITERS; w++)
		n += sh->acked_n[w];
	return n;
}

static int64_t last_ok(void)
{
	int64_t t = 0;

	for (int w = 0; w < WRITERS; w++)
		if (sh->last_ok_ms[w] > t)
			t = sh->last_ok_ms[w];
	return t;
}

/* Progress of @p n puts within @p ms_max. */
static bool progress(int64_t n, int ms_max)
{
	int64_t want = acked_total() + n, end = th_now_ms() + ms_max;

	while (acked_total() < want && th_now_ms() < end)
		usleep(5000);
	return acked_total() >= want;
}

static void test_sigkill_sync_standby(void **state)
{
	const char *env = getenv("XFER_TEST_HA_KILLS");
	int kills = env ? atoi(env) : 3, lost = 0, bad = 0;
	int64_t worst = 0, sum = 0, acked;
	struct th_proc wp[WRITERS];
	struct xfer_kv *kv;
	char key[96];

	(void)state;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sh != MAP_FAILED);
	memset((void *)sh, 0, sizeof(*sh));
	cluster_start("kill", MASTERS, true);
	for (int w = 0; w < WRITERS; w++)
		th_spawn(&wp[w], writer, (void *)(intptr_t)w);
	assert_true(progress(100, 20000));
	for (int k = 0; k < kills; k++) {
		int l = leader(10000);
		int64_t t0, dt;

		assert_int_not_equal(l, -1);
		kill_master(l);
		t0 = th_now_ms();
		while (last_ok() <= t0 && th_now_ms() - t0 < 15000)
			usleep(2000);
		dt = last_ok() - t0;
		assert_true(dt > 0);
		sum += dt;
		if (dt > worst)
			worst = dt;
		master_start(l);       /* back, as a standby */
		/* writers on, and the one back caught up before the next */
		assert_true(progress(200, 20000));
		usleep(300000);
	}
	sh->stop = 1;
	usleep(200000);
	acked = acked_total();

	kv = th_kv(0, STAGE);
	for (int w = 0; w < WRITERS; w++)
		for (int i = 0; i < NKEYS; i++) {
			int64_t ret;

			if (!sh->acked[w][i])
				continue;
			key_of(key, sizeof(key), w, i);
			ret = th_get_pattern(kv, key, LEN, 1, false);
			if (ret == -9999)
				bad++;
			else if (ret != LEN)
				lost++;
		}
	print_message("  %d kills: puts back after %lld ms at worst, %lld "
		      "on average; %lld puts acknowledged, %lld failed, %d "
		      "lost, %d with wrong bytes\n", kills, (long long)worst,
		      (long long)(sum / (kills ? kills : 1)), (long long)acked,
		      (long long)(sh->fails[0] + sh->fails[1]), lost, bad);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int w = 0; w < WRITERS; w++) {
		th_line_send(wp[w].to, "q");
		assert_int_equal(th_proc_exit(&wp[w], 30000), 0);
	}
	cluster_stop();
	munmap((void *)sh, sizeof(*sh));
	assert_int_equal(lost, 0);
	assert_int_equal(bad, 0);
	assert_true(worst < FAILOVER_MS);
}

/* A client of the masters on etcd's members, for a connection string
 * longer than th_master.addr holds. */
static struct xfer_kv *kv_etcd(void)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_kv *kv;

	assert_non_null(cfg);
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "local_server_name", "127.0.0.1");
	th_set(cfg, "workers", "1");
	kv = xfer_kv_new(NULL, cfg, th_cluster.conn, SEG, STAGE);
	xfer_config_free(cfg);
	assert_non_null(kv);
	return kv;
}

/* etcd of three members: its leader SIGKILLed while a client puts; the
 * masters go on (the leader, or a standby that takes over), puts work
 * again within ETCD_OUTAGE_MS, and every acknowledged one is read back. */
static void test_etcd_leader_killed(void **state)
{
	int64_t t0, gap = 0, last = 0, now;
	char key[32];
	struct xfer_kv *kv;
	int e, n = 0, acked[400] = { 0 };

	(void)state;
	cluster_start("etcd3", MASTERS, true);
	kv = kv_etcd();
	e = th_etcd_leader(&th_cluster);
	assert_int_not_equal(e, -1);
	t0 = th_now_ms();
	for (int i = 0; i < 400 && th_now_ms() - t0 < 15000; i++) {
		if (i == 50)
			th_etcd_kill(&th_cluster, e, SIGKILL);
		snprintf(key, sizeof(key), "e%d", i);
		if (th_put_pattern(kv, key, LEN, 1, 1, false))
			continue;
		now = th_now_ms();
		if (last && now - last > gap)
			gap = now - last;
		last = now;
		acked[i] = 1;
		n++;
		usleep(10000);
	}
	print_message("  etcd's leader killed: %d puts acknowledged, the "
		      "longest gap between two %lld ms\n", n, (long long)gap);
	assert_true(gap < ETCD_OUTAGE_MS);
	for (int i = 0; i < 400; i++) {
		if (!acked[i])
			continue;
		snprintf(key, sizeof(key), "e%d", i);
		assert_int_equal(th_get_pattern(kv, key, LEN, 1, false), LEN);
	}
	assert_int_equal(xfer_kv_free(kv), 0);
	cluster_stop();
	th_etcd_restart(&th_cluster, e);
}

/* A striped object (--dram_shard_size) over three clients' segments:
 * the standby that leads after a handover has its shards from the
 * journal stream, the same buffers, and serves its bytes. */
static void test_striped_handover(void **state)
{
	const size_t len = 12u << 20;
	struct xfer_kv_replica_desc d[XFER_KV_REPLICA_MAX];
	struct xfer_kv_replica_desc e[XFER_KV_REPLICA_MAX];
	struct xfer_kv *kv[3];
	int l, n, m = 0;
	int64_t t0;

	(void)state;
	extra_flag = "--dram_shard_size=4194304";
	cluster_start("stripe", MASTERS, true);
	extra_flag = NULL;
	l = leader(0);
	for (int i = 0; i < 3; i++)
		kv[i] = th_kv(SEG, STAGE);
	assert_int_equal(th_put_pattern(kv[0], "big", len, 5, 1, true), 0);
	n = xfer_kv_get_replica_desc(kv[1], "big", d);
	assert_int_equal(n, 3);
	assert_int_equal(d[0].shards, 3);
	th_stored_stop(ms[l].pid);
	ms[l].pid = 0;
	assert_true(leader(5000) >= 0);
	t0 = th_now_ms();
	do {
		usleep(20000);
		m = xfer_kv_get_replica_desc(kv[2], "big", e);
	} while (m != n && th_now_ms() - t0 < 10000);
	assert_int_equal(m, n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(e[i].addr, d[i].addr);
		assert_int_equal(e[i].size, d[i].size);
		assert_int_equal(e[i].shards, d[i].shards);
		assert_string_equal(e[i].endpoint, d[i].endpoint);
	}
	assert_int_equal(th_get_pattern(kv[2], "big", len, 5, false),
			 (int64_t)len);
	for (int i = 0; i < 3; i++)
		assert_int_equal(xfer_kv_free(kv[i]), 0);
	cluster_stop();
}

static int group_teardown(void **state)
{
	cluster_stop();
	return th_etcd_teardown(state);
}


int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_elect_and_handover),
		cmocka_unit_test(test_sync_waits_for_standby),
		cmocka_unit_test(test_stopped_leader),
		cmocka_unit_test(test_secret),
		cmocka_unit_test(test_hostile_standby),
		cmocka_unit_test(test_sigkill_sync_standby),
		cmocka_unit_test(test_striped_handover),
	};

	const struct CMUnitTest tests3[] = {
		cmocka_unit_test(test_etcd_leader_killed),
	};

	const char *ttl = getenv("XFER_TEST_HA_TTL");
	int ret;

	if (ttl && atoi(ttl) > 0)
		ttl_s = atoi(ttl);
	if (!mkdtemp(dir))
		return 1;
	ret = cmocka_run_group_tests(tests, th_etcd_setup1, group_teardown);
	ret |= cmocka_run_group_tests(tests3, th_etcd_setup3, group_teardown);
	th_rm_tree(dir);
	return ret;
}
