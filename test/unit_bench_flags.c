/*
 * Unit tests: xfer-bench's command line (bench/flags.c, util/gflags.c).
 * Mooncake's transfer_engine_bench flags with its defaults, every gflags
 * form (--f=v, --f v, -f=v, -f v, --f, --nof, --f=true|false|1|0|yes|no,
 * a '-' for a '_' in a name),
 * unknown flags and bad values refused with a message naming the flag,
 * and what the flags imply.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_internal.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* die() of the bench, here: the message kept, back to parse(). */
static jmp_buf died_at;
static char died[512];

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(died, sizeof(died), fmt, ap);
	va_end(ap);
	longjmp(died_at, 1);
}

void die_api(const struct xfer_engine *e, const char *what, int ret)
{
	(void)e;
	die("%s: %d", what, ret);
}

void *xmalloc(size_t len)
{
	void *p = malloc(len);

	assert_non_null(p);
	return p;
}

static struct bench_opts O;

/* Parse the NULL-ended words after the program name: 0, or -1 if the
 * bench would have died (the message in died). */
static int parse(const char *first, ...)
{
	char *argv[32] = { "xfer-bench" };
	int argc = 1;
	va_list ap;

	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *)) {
		assert_true(argc < 31);
		argv[argc++] = (char *)a;
	}
	va_end(ap);
	bench_opts_free(&O);
	died[0] = '\0';
	if (setjmp(died_at))
		return -1;
	bench_opts_parse(argc, argv, &O);
	return 0;
}

static void expect_death(const char *needle)
{
	if (!strstr(died, needle))
		fail_msg("message '%s' does not name '%s'", died, needle);
}

static void test_defaults(void **state)
{
	(void)state;
	assert_int_equal(parse("--segment_id=10.0.0.2:12345", NULL), 0);
	assert_int_equal(O.mode, BENCH_INITIATOR);
	assert_int_equal(O.op, XFER_READ);
	assert_string_equal(O.protocol, "rdma");
	assert_int_equal(O.threads, 12);
	assert_int_equal(O.batch_size, 128);
	assert_int_equal(O.block_size, 65536);
	assert_int_equal(O.buffer_size, 1u << 30);
	assert_true(O.duration_s == 10);
	assert_string_equal(O.report_unit, "GB");
	assert_true(O.report_bytes == 1e9);
	assert_int_equal(O.report_precision, 2);
	assert_false(O.auto_discovery);
	assert_null(O.metadata_server); /* p2p, the library's */
	assert_null(O.device_names);    /* every device */
	assert_string_equal(O.segment_id, "10.0.0.2:12345");
	assert_false(O.verify || O.json || O.plugin);
	assert_null(O.file);            /* the target's RAM buffer */

	/* a target serves until a signal, unless told */
	assert_int_equal(parse("--mode=target", NULL), 0);
	assert_true(O.duration_s == 0);
	assert_int_equal(parse("--mode=target", "--duration=5", NULL), 0);
	assert_true(O.duration_s == 5);
	/* an initiator needs the target's name */
	assert_int_equal(parse(NULL), -1);
	expect_death("--segment_id");
}

/* Every way gflags takes a value. */
static void test_forms(void **state)
{
	static const char *const forms[][2] = {
		{ "--mode=target", NULL }, { "--mode", "target" },
		{ "-mode=target", NULL }, { "-mode", "target" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(forms); i++) {
		assert_int_equal(parse(forms[i][0], forms[i][1], NULL), 0);
		assert_int_equal(O.mode, BENCH_TARGET);
	}
	assert_int_equal(parse("--mode=loopback", "--batch_size", "0x10",
			       "--block_size=4096", "--threads", "3",
			       "--duration=0.5", NULL), 0);
	assert_int_equal(O.batch_size, 16);
	assert_int_equal(O.block_size, 4096);
	assert_int_equal(O.threads, 3);
	assert_true(O.duration_s == 0.5);
	/* a '-' in a name stands for its '_' (--list-config), not the
	 * other way round */
	assert_int_equal(parse("--mode=loopback", "--batch-size=8",
			       "--nouse-vram", NULL), 0);
	assert_int_equal(O.batch_size, 8);
	assert_int_equal(parse("--mode=loopback", "--report-unit", "GiB",
			       NULL), 0);
	assert_string_equal(O.report_unit, "GiB");
	assert_int_equal(parse("--mode-loopback", NULL), -1);
	/* "--" ends the flags; what follows is refused */
	assert_int_equal(parse("--mode=loopback", "--", "--json", NULL), -1);
	expect_death("unexpected argument '--json'");
}

static void test_bools(void **state)
{
	static const struct {
		const char *arg;
		bool want;
	} cases[] = {
		{ "--verify", true }, { "--noverify", false },
		{ "-verify", true }, { "-noverify", false },
		{ "--verify=true", true }, { "--verify=false", false },
		{ "--verify=1", true }, { "--verify=0", false },
		{ "--verify=YES", true }, { "--verify=no", false },
		{ "--verify=t", true }, { "--verify=F", false },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		assert_int_equal(parse("--mode=loopback", "--verify",
				       cases[i].arg, NULL), 0);
		if (O.verify != cases[i].want)
			fail_msg("%s: verify %d", cases[i].arg, O.verify);
	}
	/* the word after a boolean is not its value */
	assert_int_equal(parse("--mode=loopback", "--json", "false", NULL), -1);
	expect_death("unexpected argument 'false'");
	assert_int_equal(parse("--mode=loopback", "--verify=maybe", NULL), -1);
	expect_death("--verify");
	/* Mooncake's GPU flags: off is fine, on is refused */
	assert_int_equal(parse("--mode=loopback", "--nouse_vram",
			       "--init_mem=false", "--gpu_id=1", NULL), 0);
	assert_int_equal(parse("--mode=loopback", "--use_vram", NULL), -1);
	expect_death("--use_vram");
}

static void test_refused(void **state)
{
	static const struct {
		const char *arg, *named;
	} cases[] = {
		{ "--nosuch", "'nosuch'" },
		{ "--nosuch=1", "'nosuch'" },
		{ "--nothreads", "'nothreads'" }, /* not a boolean */
		{ "--noverify=1", "'noverify'" },
		{ "--threads=abc", "--threads" },
		{ "--threads=0", "--threads" },
		{ "--batch_size=-1", "--batch_size" },
		{ "--block_size=", "--block_size" },
		{ "--duration=-1", "--duration" },
		{ "--mode=server", "--mode" },
		{ "--operation=copy", "--operation" },
		{ "--protocol=nvlink", "--protocol" },
		{ "--backend=tent", "--backend" },
		{ "--report_precision=-1", "--report_precision" },
		{ "--device_name=", "--device_name" },
		{ "--metadata_type=zk", "--metadata_type" },
		{ "--file=", "--file" },
		{ "--threads", "--threads" }, /* no value left */
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		if (parse("--mode=loopback", cases[i].arg, NULL) != -1)
			fail_msg("%s: accepted", cases[i].arg);
		expect_death(cases[i].named);
	}
}

/* What the flags imply. */
static void test_implied(void **state)
{
	(void)state;
	/* auto discovery: RDMA if the host has devices, else TCP */
	assert_int_equal(parse("--mode=loopback", "--auto_discovery=true",
			       "--protocol=rdma", NULL), 0);
	assert_string_equal(O.protocol, bench_have_rdma() ? "rdma" : "tcp");
	assert_true(O.auto_discovery);

	/* report units */
	assert_int_equal(parse("--mode=loopback", "--report_unit=GiB",
			       "--report_precision=4", NULL), 0);
	assert_true(O.report_bytes == 1073741824.0);
	assert_int_equal(O.report_precision, 4);
	assert_int_equal(parse("--mode=loopback", "--report_unit=Mb", NULL),
			 0);
	assert_true(O.report_bytes == 125000.0);
	assert_int_equal(parse("--mode=loopback", "--report_unit=XB", NULL),
			 0); /* a warning, as Mooncake: GB */
	assert_string_equal(O.report_unit, "GB");

	/* --metadata_type of Mooncake's TENT bench */
	assert_int_equal(parse("--mode=loopback", "--metadata_type=etcd",
			       "--metadata_servers=127.0.0.1:2379", NULL), 0);
	assert_string_equal(O.metadata_server, "etcd://127.0.0.1:2379");
	assert_int_equal(parse("--mode=loopback", "--metadata_type=redis",
			       "--metadata_server=h:6379", NULL), 0);
	assert_string_equal(O.metadata_server, "redis://h:6379");
	assert_int_equal(parse("--mode=loopback", "--metadata_type=http",
			       "--metadata_servers=http://h:8080/metadata",
			       NULL), 0);
	assert_string_equal(O.metadata_server, "http://h:8080/metadata");
	assert_int_equal(parse("--mode=loopback", "--metadata_type=p2p",
			       NULL), 0);
	assert_string_equal(O.metadata_server, "p2p");
	assert_int_equal(parse("--mode=loopback", "--metadata_type=etcd",
			       NULL), -1);
	expect_death("--metadata_servers");
	assert_int_equal(parse("--mode=loopback",
			       "--metadata_server=P2PHANDSHAKE", NULL), 0);
	assert_string_equal(O.metadata_server, "P2PHANDSHAKE");

	/* a buffer below what the threads use is raised, as Mooncake */
	assert_int_equal(parse("--segment_id=h:1", "--buffer_size=4096",
			       "--threads=2", "--batch_size=4",
			       "--block_size=1024", NULL), 0);
	assert_int_equal(O.buffer_size, 2 * 4 * 1024);
	/* loopback without one: twice what the threads use */
	assert_int_equal(parse("--mode=loopback", "--threads=2",
			       "--batch_size=4", "--block_size=1024", NULL), 0);
	assert_int_equal(O.buffer_size, 2 * 2 * 4 * 1024);
	assert_string_equal(O.local_server_name, "127.0.0.1");

	/* --footprint: requests wrap round within it, whole blocks */
	assert_int_equal(parse("--mode=loopback", "--batch_size=4",
			       "--block_size=1024", "--footprint=2500", NULL),
			 0);
	assert_int_equal(O.footprint, 2500);
	assert_int_equal(bench_block_off(&O, 1), 1024);
	assert_int_equal(bench_block_off(&O, 2), 0);
	assert_int_equal(bench_block_off(&O, 3), 1024);
	O.footprint = 100; /* under a block: every request on the first */
	assert_int_equal(bench_block_off(&O, 3), 0);
	O.footprint = 0;
	assert_int_equal(bench_block_off(&O, 3), 3 * 1024);
	assert_int_equal(parse("--mode=loopback", "--batch_size=4",
			       "--block_size=1024", "--footprint=1024",
			       "--verify", NULL), -1);
	expect_death("--verify");
	assert_int_equal(parse("--mode=loopback", "--batch_size=4",
			       "--block_size=1024", "--footprint=4096",
			       "--verify", NULL), 0);

	/* a file segment: the path as given, on either side */
	assert_int_equal(parse("--mode=target", "--file", "/var/tmp/f",
			       NULL), 0);
	assert_string_equal(O.file, "/var/tmp/f");
	assert_int_equal(parse("--segment_id=h:1", "--file=/var/tmp/f",
			       NULL), 0);
	assert_string_equal(O.file, "/var/tmp/f");

	/* the matrix, given as JSON */
	assert_int_equal(parse("--mode=loopback", "--nic_priority_matrix",
			       "{\"cpu:0\":[[\"rxe0\"],[]]}", NULL), 0);
	assert_string_equal(O.matrix, "{\"cpu:0\":[[\"rxe0\"],[]]}");
	bench_opts_free(&O);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_bools),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_implied),
	};

	unsetenv("MC_FORCE_TCP");
	return cmocka_run_group_tests_name("xfer-bench flags", tests, NULL,
					   NULL);
}
