/*
 * SSD segments of the store against a real xfer-stored: an owner
 * process lends DRAM and a file on tmpfs (xfer_register_file(), then
 * xfer_kv_mount_file()); puts
 * ask for SSD replicas (nof_replica_num) and readers in this process get
 * them through the owner's file data port and from the file itself;
 * DRAM filled past the watermark offloads objects to the file
 * (--enable_offload --offload_on_evict) and a get promotes them back
 * (--promotion_on_hit), also with the file on another client (through
 * its data port); a restarted master with a journal keeps SSD
 * replicas. Every byte read back is checked. The reads' speeds are
 * printed (SSD through the owner vs DRAM over TCP, an offloaded object's
 * first get vs a DRAM get): noisy on a shared machine, not asserted.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xfer/store.h>
#include <xfer/xfer.h>

#include "test/helpers.h"
#include "test/th_store.h"

#define MiB (1u << 20)
#define STAGE (32 * MiB)

static char file_path[128];

/* A client whose engine reads files of this host itself (@p local) or
 * through their owners' data ports. NULL with errno. No cmocka. */
static struct xfer_kv *kv_new(uint64_t seg, uint64_t stage, bool local)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_kv *kv = NULL;

	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "local_server_name", "127.0.0.1") &&
	    !xfer_config_set(cfg, "workers", "1") &&
	    !xfer_config_set(cfg, "file_local", local ? "1" : "0"))
		kv = xfer_kv_new(NULL, cfg, th_master.addr, seg, stage);
	xfer_config_free(cfg);
	return kv;
}

struct owner_args {
	uint64_t dram, file;
};

/*
 * The owner: DRAM and the file lent, its engine's name said, then each
 * line answered until "q":
 *   put KEY LEN VARIANT DRAM SSD    a put with those replicas
 *   get KEY LEN VARIANT             a get, bytes checked
 */
static int role_owner(int in, int out, void *arg)
{
	const struct owner_args *a = arg;
	struct xfer_kv *kv = kv_new(a->dram, STAGE, true);
	char line[256], op[8], key[128], res[32];
	unsigned long long len, v;
	unsigned dram = 1, ssd = 0;
	int64_t ret;

	if (!kv)
		return 10;
	if (xfer_register_file(xfer_kv_engine(kv), file_path, a->file,
			       NULL) ||
	    xfer_kv_mount_file(kv, 0, a->file))
		return 11;
	th_line_send(out, xfer_engine_name(xfer_kv_engine(kv)));
	while (th_line_recv(in, line, sizeof(line), 300000) >= 0 &&
	       strcmp(line, "q")) {
		if (sscanf(line, "%7s %127s %llu %llu %u %u", op, key, &len,
			   &v, &dram, &ssd) < 4)
			return 12;
		if (!strcmp(op, "put")) {
			struct xfer_kv_replicate rc = {
				.replica_num = dram, .nof_replica_num = ssd };
			uint8_t *buf = malloc(len);

			th_fill(buf, len, th_seed(key, v));
			ret = xfer_kv_put(kv, key, buf, len, &rc);
			free(buf);
		} else {
			ret = th_get_pattern(kv, key, len, v, false);
		}
		snprintf(res, sizeof(res), "%lld", (long long)ret);
		th_line_send(out, res);
	}
	return xfer_kv_free(kv) ? 13 : 0;
}

static void owner_start(struct th_proc *p, struct owner_args *a, char *name)
{
	th_spawn(p, role_owner, a);
	assert_true(th_line_recv(p->from, name, 64, 30000) > 0);
}

static int setup(void **state)
{
	int fd;

	(void)state;
	snprintf(file_path, sizeof(file_path), "/dev/shm/it_store_ssd-%d",
		 (int)getpid());
	unlink(file_path);
	fd = open(file_path, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 64 * MiB), 0);
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	unlink(file_path);
	return th_master_teardown(state);
}

/* How many of @p key's replicas lie in the SSD segment "nvmeof/..." and
 * how many in DRAM, by a raw query. */
static void where(const char *key, int *ssd, int *dram)
{
	char names[16][64];
	int32_t err;
	int n = th_raw_query(key, names, &err);

	*ssd = *dram = 0;
	for (int i = 0; i < n; i++) {
		if (!strncmp(names[i], "nvmeof/", 7))
			++*ssd;
		else
			++*dram;
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds of one zero-copy get of @p key (@p len bytes, pattern @p v)
 * into @p buf, its bytes checked. */
static double get_s(struct xfer_kv *kv, const char *key, uint8_t *buf,
		    size_t len, uint64_t v)
{
	double t0 = now_s(), dt;

	memset(buf, 0, len);
	t0 = now_s();
	assert_int_equal(xfer_kv_get_into(kv, key, buf, len), len);
	dt = now_s() - t0;
	assert_int_equal(th_check(buf, len, th_seed(key, v)), -1);
	return dt;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return v[n / 2];
}

/* SSD replicas asked per put land in the owner's file; readers get them
 * through its data port and from the file itself, DRAM ones first. */
static void test_ssd_replicas(void **state)
{
	struct owner_args a = { 16 * MiB, 64 * MiB };
	struct xfer_kv *far, *near;
	char name[64], seg[80];
	struct th_proc o;
	int ssd, dram;
	uint8_t *buf;
	double t_ram, t_ssd;

	(void)state;
	th_master_start((const char *const[]){ "--metrics_port=0", NULL });
	owner_start(&o, &a, name);
	snprintf(seg, sizeof(seg), "nvmeof/%s", name);
	assert_int_equal(th_kv_cmd(&o, "put s1 %u 1 0 1", 3 * MiB + 5), 0);
	assert_int_equal(th_kv_cmd(&o, "put both %u 2 1 1", MiB), 0);
	assert_int_equal(th_kv_cmd(&o, "put ram %u 3 1 0", 8 * MiB), 0);
	assert_int_equal(th_kv_cmd(&o, "put ssd %u 4 0 1", 8 * MiB), 0);
	assert_int_equal(th_kv_cmd(&o, "put ssd1 %u 5 0 1", MiB), 0);
	where("s1", &ssd, &dram);
	assert_int_equal(ssd, 1);
	assert_int_equal(dram, 0);
	where("both", &ssd, &dram);
	assert_int_equal(ssd, 1);
	assert_int_equal(dram, 1);
	{
		char names[16][64];
		int32_t err;

		assert_int_equal(th_raw_query("both", names, &err), 2);
		assert_string_equal(names[0], name);   /* DRAM first */
		assert_string_equal(names[1], seg);
	}
	/* the owner reads its own file */
	assert_int_equal(th_kv_cmd(&o, "get s1 %u 1", 4 * MiB), 3 * MiB + 5);

	far = kv_new(0, STAGE, false);
	near = kv_new(0, STAGE, true);
	assert_non_null(far);
	assert_non_null(near);
	assert_int_equal(th_get_pattern(far, "s1", 4 * MiB, 1, false),
			 3 * MiB + 5);
	assert_int_equal(th_get_pattern(near, "s1", 4 * MiB, 1, false),
			 3 * MiB + 5);
	assert_int_equal(th_get_pattern(far, "both", MiB, 2, true), MiB);

	/* DRAM over TCP vs SSD through the owner, same processes, turn
	 * about */
	buf = th_alloc(8 * MiB);
	assert_int_equal(xfer_kv_register_buffer(far, buf, 8 * MiB), 0);
	for (size_t len = MiB; len <= 8 * MiB; len *= 8) {
		double ram[31], ssd_s[31];

		for (int i = 0; i < 31; i++) {
			ram[i] = get_s(far, len == MiB ? "both" : "ram", buf,
				       len, len == MiB ? 2 : 3);
			ssd_s[i] = get_s(far, len == MiB ? "ssd1" : "ssd", buf,
					 len, len == MiB ? 5 : 4);
		}
		t_ram = median(ram, 31);
		t_ssd = median(ssd_s, 31);
		print_message("%zu MiB get (median of 31): DRAM over TCP "
			      "%.2f GB/s, SSD (tmpfs) through the owner %.2f "
			      "GB/s, ratio %.2f\n", len / MiB,
			      (double)len / t_ram / 1e9,
			      (double)len / t_ssd / 1e9, t_ram / t_ssd);
	}
	assert_int_equal(xfer_kv_unregister_buffer(far, buf), 0);
	free(buf);
	assert_int_equal(xfer_kv_free(far), 0);
	assert_int_equal(xfer_kv_free(near), 0);

	/* without SSD segments an SSD replica cannot be made */
	th_kv_proc_stop(&o);
	far = th_kv(4 * MiB, MiB);
	assert_int_equal(xfer_kv_put(far, "none", name, 64,
				     &(struct xfer_kv_replicate){
					     .nof_replica_num = 1 }),
			 XFER_KV_NO_AVAILABLE_HANDLE);
	assert_int_equal(xfer_kv_put(far, "none", name, 64,
				     &(struct xfer_kv_replicate){ 0 }),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_free(far), 0);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

/* Wait up to 10 s for @p key to lie in @p ssd SSD and @p dram DRAM
 * replicas. */
static void wait_where(const char *key, int want_ssd, int want_dram)
{
	int ssd = -1, dram = -1;

	for (int i = 0; i < 200; i++) {
		where(key, &ssd, &dram);
		if (ssd == want_ssd && dram == want_dram)
			return;
		usleep(50000);
	}
	fail_msg("%s: %d SSD and %d DRAM replicas, not %d and %d", key, ssd,
		 dram, want_ssd, want_dram);
}

/* DRAM full: the oldest objects move to the owner's file instead of
 * going; a get reads them there, and the next is served from DRAM again
 * (promoted by the owner's copy). */
static void test_offload_promote(void **state)
{
	struct owner_args a = { 8 * MiB + 4096, 64 * MiB };
	struct xfer_kv *kv;
	struct th_proc o;
	char name[64], key[16];
	int ssd, dram, offloaded = 0;
	uint8_t *buf;
	double t_dram, t_first;

	(void)state;
	th_master_start((const char *const[]){
		"--metrics_port=0", "--enable_offload=true",
		"--offload_on_evict=true", "--promotion_on_hit=true",
		"--promotion_admission_threshold=1",
		"--default_kv_lease_ttl=2s", NULL });
	owner_start(&o, &a, name);
	kv = kv_new(0, STAGE, true);
	assert_non_null(kv);
	buf = th_alloc(MiB);
	assert_int_equal(xfer_kv_register_buffer(kv, buf, MiB), 0);
	for (int i = 0; i < 24; i++) {
		int64_t ret;

		snprintf(key, sizeof(key), "o%d", i);
		/* a put that finds DRAM full waits for the offload */
		for (int t = 0; t < 100; t++) {
			ret = th_put_pattern(kv, key, MiB, 5, 1, false);
			if (ret != XFER_KV_NO_AVAILABLE_HANDLE)
				break;
			usleep(50000);
		}
		assert_int_equal(ret, 0);
	}
	usleep(1500000);                /* the last copies end */
	for (int i = 0; i < 24; i++) {
		snprintf(key, sizeof(key), "o%d", i);
		where(key, &ssd, &dram);
		assert_int_equal(ssd + dram, 1);   /* none lost */
		offloaded += ssd;
	}
	print_message("%d of 24 objects of 1 MiB offloaded from 8 MiB of "
		      "DRAM\n", offloaded);
	assert_true(offloaded >= 16);
	/* the first get of an offloaded object reads it from SSD, then the
	 * owner copies it back to DRAM (o1 opened the file segment) */
	where("o0", &ssd, &dram);
	assert_int_equal(ssd, 1);
	assert_int_equal(th_get_pattern(kv, "o1", MiB, 5, true), MiB);
	assert_int_equal(th_get_pattern(kv, "o23", MiB, 5, true), MiB);
	{
		double d[7], f[7];

		for (int i = 0; i < 7; i++) {
			snprintf(key, sizeof(key), "o%d", 23 - i);
			d[i] = get_s(kv, key, buf, MiB, 5);
			snprintf(key, sizeof(key), "o%d", 2 + i);
			f[i] = get_s(kv, key, buf, MiB, 5);
		}
		t_dram = median(d, 7);
		t_first = median(f, 7);
	}
	print_message("1 MiB get (median of 7): DRAM %.3f ms, an offloaded "
		      "object's first %.3f ms, ratio %.2f\n", t_dram * 1e3,
		      t_first * 1e3, t_first / t_dram);
	where("o0", &ssd, &dram);
	assert_int_equal(ssd, 1);
	assert_int_equal(th_get_pattern(kv, "o0", MiB, 5, true), MiB);
	wait_where("o0", 1, 1);         /* the SSD copy stays */
	assert_int_equal(th_get_pattern(kv, "o0", MiB, 5, false), MiB);
	/* the owner reads its promoted copy too */
	assert_int_equal(th_kv_cmd(&o, "get o0 %u 5", MiB), MiB);
	assert_int_equal(xfer_kv_unregister_buffer(kv, buf), 0);
	free(buf);
	assert_int_equal(xfer_kv_free(kv), 0);
	th_kv_proc_stop(&o);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

/* The SSD segment on another client, which lends no DRAM: the DRAM
 * segment's owner writes its offloads through the SSD owner's file data
 * port and reads promotions back the same way. */
static void test_offload_remote(void **state)
{
	struct owner_args a = { 0, 64 * MiB };
	struct xfer_kv *kv;
	struct th_proc o;
	char name[64], key[16];
	int ssd, dram, offloaded = 0;

	(void)state;
	th_master_start((const char *const[]){
		"--metrics_port=0", "--enable_offload=true",
		"--offload_on_evict=true", "--promotion_on_hit=true",
		"--promotion_admission_threshold=1", NULL });
	owner_start(&o, &a, name);
	kv = kv_new(4 * MiB + 4096, STAGE, false);
	assert_non_null(kv);
	for (int i = 0; i < 10; i++) {
		int64_t ret;

		snprintf(key, sizeof(key), "r%d", i);
		for (int t = 0; t < 100; t++) {
			ret = th_put_pattern(kv, key, MiB, 6, 1, false);
			if (ret != XFER_KV_NO_AVAILABLE_HANDLE)
				break;
			usleep(50000);
		}
		assert_int_equal(ret, 0);
	}
	usleep(1500000);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "r%d", i);
		where(key, &ssd, &dram);
		assert_int_equal(ssd + dram, 1);
		offloaded += ssd;
	}
	assert_true(offloaded >= 6);
	where("r0", &ssd, &dram);
	assert_int_equal(ssd, 1);
	assert_int_equal(th_get_pattern(kv, "r0", MiB, 6, false), MiB);
	wait_where("r0", 1, 1);         /* promoted into this client */
	assert_int_equal(th_get_pattern(kv, "r0", MiB, 6, false), MiB);
	assert_int_equal(xfer_kv_free(kv), 0);
	th_kv_proc_stop(&o);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

/* An object put with an SSD replica, and one that eager offload
 * (--enable_offload alone) copies to SSD at its put, come back from a
 * restarted master's journal once the owner mounts again. */
static void test_journal(void **state)
{
	struct owner_args a = { 16 * MiB, 64 * MiB };
	char name[64], journal[80], flag[96];
	const char *args[] = { "--metrics_port=0", "--enable_offload=true",
			       flag, NULL };
	struct xfer_kv *kv;
	struct th_proc o;
	uint16_t port;

	(void)state;
	snprintf(journal, sizeof(journal), "/dev/shm/it_store_ssd-%d.db",
		 (int)getpid());
	snprintf(flag, sizeof(flag), "--journal=%s", journal);
	unlink(journal);
	th_master_start(args);
	owner_start(&o, &a, name);
	assert_int_equal(th_kv_cmd(&o, "put j1 %u 7 0 1", 2 * MiB + 3), 0);
	assert_int_equal(th_kv_cmd(&o, "put j2 %u 8 1 0", MiB), 0);
	wait_where("j1", 1, 0);
	wait_where("j2", 1, 1);        /* copied to SSD at its put */
	th_stored_stop(th_master.pid);
	th_master.pid = th_stored_start(args, th_master.port, &port);
	/* the owner reconnects and mounts both again */
	wait_where("j1", 1, 0);
	wait_where("j2", 1, 1);
	kv = kv_new(0, STAGE, false);
	assert_non_null(kv);
	assert_int_equal(th_get_pattern(kv, "j1", 4 * MiB, 7, false),
			 2 * MiB + 3);
	assert_int_equal(th_get_pattern(kv, "j2", MiB, 8, false), MiB);
	assert_int_equal(xfer_kv_free(kv), 0);
	th_kv_proc_stop(&o);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
	unlink(journal);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ssd_replicas, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_offload_promote, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_offload_remote, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_journal, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
