/*
 * Unit tests: Mooncake's environment variables (the table of docs/CONFIG.md).
 * Each MC_ name sets its key, in Mooncake's units, and changes what it
 * says it changes: the engine's name, port, bind address, store and key
 * prefix, slices, timeout, frame limit, the log level. The names Mooncake
 * does not have are not read.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xfer/xfer.h>

#include "core/engine_internal.h"
#include "util/log_internal.h"
#include "test/helpers.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Every MC_ name xfer reads: the key it sets and the value that key
 * gets from the variable's value (in Mooncake's units). */
static const struct {
	const char *var, *value, *key, *want;
} mc[] = {
	{ "MC_LOCAL_SERVER_NAME", "node7", "local_server_name", "node7" },
	{ "MC_METADATA_SERVER", "redis://10.0.0.1:6379", "metadata_server",
	  "redis://10.0.0.1:6379" },
	{ "MC_METADATA_CLUSTER_ID", "blue", "cluster_id", "blue" },
	{ "MC_REDIS_USERNAME", "alice", "metadata_user", "alice" },
	{ "MC_REDIS_PASSWORD", "s3cret", "metadata_password", "s3cret" },
	{ "MC_TCP_BIND_ADDRESS", "127.0.0.1", "bind_addr", "127.0.0.1" },
	{ "MC_HANDSHAKE_PORT", "15123", "rpc_port", "15123" },
	{ "MC_SLICE_SIZE", "131072", "slice_size", "131072" },
	{ "MC_TRANSFER_TIMEOUT", "7", "transfer_timeout_ms", "7000" },
	{ "MC_HANDSHAKE_MAX_LENGTH", "2097152", "handshake_max_len",
	  "2097152" },
#ifdef XFER_HAVE_RDMA /* the RDMA part's keys */
	{ "MC_NUM_QP_PER_EP", "4", "qps_per_ep", "4" },
	{ "MC_MAX_EP_PER_CTX", "64", "max_ep_per_ctx", "64" },
	{ "MC_RETRY_CNT", "3", "retry_cnt", "3" },
	{ "MC_GID_INDEX", "3", "gid_index", "3" },
	{ "MC_MTU", "1024", "mtu", "1024" },
	{ "MC_MAX_WR", "128", "max_wr", "128" },
	{ "MC_MAX_CQE_PER_CTX", "8192", "max_cqe", "8192" },
	{ "MC_IB_PORT", "2", "ib_port", "2" },
	{ "MC_NUM_CQ_PER_CTX", "2", "num_cq", "2" },
	{ "MC_NUM_COMP_CHANNELS_PER_CTX", "3", "num_comp_channels", "3" },
	{ "MC_MAX_SGE", "8", "max_sge", "8" },
	{ "MC_MAX_INLINE", "128", "max_inline", "128" },
#endif
};

/* Names Mooncake does not have, or has with another meaning: not read
 * (their XFER_ names are); the key keeps its default. */
static const struct {
	const char *var, *value, *key, *def;
} not_mc[] = {
	{ "MC_CLUSTER_ID", "red", "cluster_id", NULL },
	{ "MC_PROTOCOL", "rdma", "protocol", "tcp" },
	{ "MC_TCP_CONNS", "9", "tcp_conns", "2" },
#ifdef XFER_HAVE_RDMA
	{ "MC_DEVICE_NAME", "mlx5_0", "device_names", NULL },
	{ "MC_NIC_PRIORITY_MATRIX", "{}", "nic_priority_matrix", NULL },
#endif
	{ "MC_WORKERS_PER_CTX", "4", "workers", "1" },
};

static int clear_env(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(mc); i++)
		unsetenv(mc[i].var);
	for (size_t i = 0; i < ARRAY_SIZE(not_mc); i++)
		unsetenv(not_mc[i].var);
	return 0;
}

static void expect_key(const struct xfer_config *cfg, const char *key,
		       const char *want, const char *var)
{
	const char *got = xfer_config_get(cfg, key);

	if (want ? !got || strcmp(got, want) : got != NULL)
		fail_msg("%s: %s is %s, want %s", var, key,
			 got ? got : "unset", want ? want : "unset");
}

static void test_mc_names(void **state)
{
	struct xfer_config *cfg;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(mc); i++) {
		setenv(mc[i].var, mc[i].value, 1);
		cfg = th_config();
		expect_key(cfg, mc[i].key, mc[i].want, mc[i].var);
		xfer_config_free(cfg);
		unsetenv(mc[i].var);
	}
}

static void test_not_mc_names(void **state)
{
	struct xfer_config *cfg;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(not_mc); i++)
		setenv(not_mc[i].var, not_mc[i].value, 1);
	cfg = th_config();
	for (size_t i = 0; i < ARRAY_SIZE(not_mc); i++) {
		expect_key(cfg, not_mc[i].key, not_mc[i].def, not_mc[i].var);
		assert_int_equal(xfer_config_set(cfg, not_mc[i].var, "1"),
				 -ENOENT);
	}
	xfer_config_free(cfg);
}

/* An engine from the environment alone (xfer_engine_new(NULL)), bound
 * to 127.0.0.1, with @p var set to @p value (@p var NULL: nothing). */
static struct xfer_engine *env_engine(const char *var, const char *value)
{
	struct xfer_engine *e;

	setenv("MC_TCP_BIND_ADDRESS", "127.0.0.1", 1);
	if (var)
		setenv(var, value, 1);
	e = xfer_engine_new(NULL);
	if (!e)
		fail_msg("engine from the environment: %s", strerror(errno));
	return e;
}

static int try_connect(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), ret;

	assert_true(fd >= 0);
	inet_pton(AF_INET, addr, &sa.sin_addr);
	ret = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	close(fd);
	return ret;
}

/* MC_TCP_BIND_ADDRESS: the listener binds that address alone, and names
 * the engine; MC_HANDSHAKE_PORT: the port it listens on. */
static void test_bind_and_port(void **state)
{
	uint16_t port = th_free_port();
	char num[8], want[32];
	struct xfer_engine *e;

	(void)state;
	snprintf(num, sizeof(num), "%u", port);
	e = env_engine("MC_HANDSHAKE_PORT", num);
	assert_int_equal(xfer_engine_rpc_port(e), port);
	snprintf(want, sizeof(want), "127.0.0.1:%u", port);
	assert_string_equal(xfer_engine_name(e), want);
	assert_int_equal(try_connect("127.0.0.1", port), 0);
	assert_int_equal(try_connect("127.0.0.2", port), -ECONNREFUSED);
	xfer_engine_free(e);
}

/* MC_LOCAL_SERVER_NAME: the host part of the engine's name (p2p). */
static void test_local_server_name(void **state)
{
	struct xfer_engine *e;

	(void)state;
	e = env_engine("MC_LOCAL_SERVER_NAME", "localhost");
	assert_int_equal(strncmp(xfer_engine_name(e), "localhost:", 10), 0);
	xfer_engine_free(e);
}

/* MC_METADATA_SERVER: the store the engine opens (one that is away
 * fails the engine with ECONNREFUSED). */
static void test_metadata_server(void **state)
{
	char url[64];

	(void)state;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata",
		 th_free_port());
	setenv("MC_TCP_BIND_ADDRESS", "127.0.0.1", 1);
	setenv("MC_METADATA_SERVER", url, 1);
	errno = 0;
	assert_null(xfer_engine_new(NULL));
	assert_int_equal(errno, ECONNREFUSED);
}

/* MC_METADATA_CLUSTER_ID: keys under mooncake/<id>/, one '/' whether or
 * not the id ends in one (Mooncake adds it when missing). */
static void test_cluster_id(void **state)
{
	static const char *const ids[] = { "blue", "blue/" };
	struct xfer_engine *e;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		e = env_engine("MC_METADATA_CLUSTER_ID", ids[i]);
		assert_string_equal(e->meta.prefix, "mooncake/blue/");
		xfer_engine_free(e);
	}
	unsetenv("MC_METADATA_CLUSTER_ID");
	e = env_engine(NULL, NULL);
	assert_string_equal(e->meta.prefix, "mooncake/");
	xfer_engine_free(e);
}

/* MC_SLICE_SIZE: the size slices are cut to; MC_TRANSFER_TIMEOUT
 * (seconds): what the transports time a task out after. */
static void test_slice_and_timeout(void **state)
{
	struct xfer_engine *e;

	(void)state;
	setenv("MC_TRANSFER_TIMEOUT", "7", 1);
	e = env_engine("MC_SLICE_SIZE", "131072");
	assert_int_equal(e->slice_size, 131072);
	for (int i = 0; e->tps[i]; i++)
		assert_int_equal(e->tp_env[i].transfer_timeout_ms, 7000);
	xfer_engine_free(e);
}

/* Send a Probe frame of @p body_len bytes (spaces, then {}), length
 * field @p body_len + 1: answered, or closed without a reply (true). */
static bool probe_closed(uint16_t port, size_t body_len)
{
	char *body = malloc(body_len + 1), *reply = NULL;
	int fd = th_connect(port);
	size_t len;
	bool closed;

	assert_non_null(body);
	memset(body, ' ', body_len);
	memcpy(body + body_len - 3, "{}\n", 3);
	/* a refused frame may be closed before it is all sent */
	closed = th_hs_send(fd, 3, body, body_len) != 0 ||
		 th_hs_recv(fd, &reply, &len, 6000) != 0;
	free(reply);
	free(body);
	close(fd);
	return closed;
}

/* MC_HANDSHAKE_MAX_LENGTH: the largest handshake frame taken. */
static void test_handshake_max_length(void **state)
{
	struct xfer_engine *e;
	uint16_t port;

	(void)state;
	e = env_engine("MC_HANDSHAKE_MAX_LENGTH", "2097152");
	port = xfer_engine_rpc_port(e);
	assert_false(probe_closed(port, (2u << 20) - 1));
	assert_true(probe_closed(port, 2u << 20));
	xfer_engine_free(e);
}

/* ---- the log level: a fresh process each, the level is read once ---- */

/* In the child: log a line at each level and exit. */
static int log_child(void)
{
	xfer_log(XFER_LOG_ERROR, "line error");
	xfer_log(XFER_LOG_WARN, "line warn");
	xfer_log(XFER_LOG_INFO, "line info");
	xfer_log(XFER_LOG_DEBUG, "line debug");
	return 0;
}

/* Run this program as a log child with @p env (NAME=VALUE, or NULL) and
 * return how many of its four lines it printed (error first). */
static int lines_logged(const char *const *env)
{
	char out[1024];
	size_t n = 0;
	ssize_t r;
	int pfd[2], status, lines = 0;
	pid_t pid;

	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = { "unit_env", "--log-child", NULL };
		static char *none[] = { NULL };

		dup2(pfd[1], 2);
		close(pfd[0]);
		execve("/proc/self/exe", argv, env ? (char **)env : none);
		_exit(127);
	}
	close(pfd[1]);
	while ((r = read(pfd[0], out + n, sizeof(out) - 1 - n)) > 0)
		n += (size_t)r;
	close(pfd[0]);
	out[n] = '\0';
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (const char *p = out; (p = strstr(p, "line ")); p++)
		lines++;
	return lines;
}

/* MC_VERBOSE: every line (debug); MC_LOG_LEVEL: Mooncake's level names;
 * XFER_LOG_LEVEL over both; default warn. */
static void test_log_level(void **state)
{
	static const struct {
		const char *env[3];
		int lines;
	} cases[] = {
		{ { NULL }, 2 },
		{ { "MC_VERBOSE=1" }, 4 },
		{ { "MC_VERBOSE=true" }, 4 },
		{ { "MC_VERBOSE=0" }, 2 },
		{ { "MC_LOG_LEVEL=INFO" }, 3 },
		{ { "MC_LOG_LEVEL=ERROR" }, 1 },
		{ { "MC_LOG_LEVEL=TRACE" }, 4 },
		{ { "MC_LOG_LEVEL=WARNING", "MC_VERBOSE=1" }, 2 },
		{ { "XFER_LOG_LEVEL=error", "MC_VERBOSE=1" }, 1 },
		{ { "XFER_LOG_LEVEL=info", "MC_LOG_LEVEL=ERROR" }, 3 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int got = lines_logged(cases[i].env[0] ? cases[i].env : NULL);

		if (got != cases[i].lines)
			fail_msg("%s %s: %d lines, want %d",
				 cases[i].env[0] ? cases[i].env[0] : "(none)",
				 cases[i].env[1] ? cases[i].env[1] : "", got,
				 cases[i].lines);
	}
}

#define T(f) cmocka_unit_test_setup_teardown(f, clear_env, clear_env)

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		T(test_mc_names),
		T(test_not_mc_names),
		T(test_bind_and_port),
		T(test_local_server_name),
		T(test_metadata_server),
		T(test_cluster_id),
		T(test_slice_and_timeout),
		T(test_handshake_max_length),
		T(test_log_level),
	};

	if (argc > 1 && !strcmp(argv[1], "--log-child"))
		return log_child();
	return cmocka_run_group_tests_name("Mooncake's environment", tests,
					   NULL, NULL);
}
