/* Shared by the file segment tests (th_file.h). */
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
#include <sys/wait.h>
#include <unistd.h>

#include "core/slice_internal.h"
#include "test/helpers.h"
#include "test/th_file.h"

char th_dir[64];
char th_metad_url[128];
static pid_t metad_pid = -1;
static const char *self;

void th_file_make(const char *path, size_t len, uint64_t seed)
{
	uint8_t *buf = malloc(len ? len : 1);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	assert_non_null(buf);
	assert_true(fd >= 0);
	th_fill(buf, len, seed);
	assert_int_equal(pwrite(fd, buf, len, 0), (ssize_t)len);
	close(fd);
	free(buf);
}

void th_file_read(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

uint64_t th_file_sum(const char *path)
{
	uint64_t h = 0xcbf29ce484222325ull;
	uint8_t buf[1 << 16];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ buf[i]) * 0x100000001b3ull;
	assert_int_equal(n, 0);
	close(fd);
	return h;
}

static struct xfer_config *config(bool metad, const char *name)
{
	struct xfer_config *cfg = th_config();

	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "workers", "1");
	if (metad) {
		th_set(cfg, "metadata_server", th_metad_url);
		th_set(cfg, "local_server_name", name);
	} else {
		th_set(cfg, "local_server_name", "127.0.0.1");
		th_set(cfg, "rpc_port", "0");
	}
	return cfg;
}

struct xfer_engine *th_file_engine(const struct th_mode *m)
{
	struct xfer_config *cfg = config(m->metad, "initiator");
	struct xfer_engine *e;

	th_set(cfg, "file_local", m->local ? "1" : "0");
	th_set(cfg, "file_threads", m->threads ? "1" : "0");
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(e);
	return e;
}

int64_t th_file_open(struct xfer_engine *e, const char *owner)
{
	char name[160];
	int64_t id;

	snprintf(name, sizeof(name), "nvmeof/%s", owner);
	id = xfer_segment_open(e, name);
	if (id < 0)
		fail_msg("open %s: %s (%s)", name, strerror((int)-id),
			 xfer_engine_last_error(e));
	return id;
}

/* The owner program: register, say the name, serve until stdin closes. */
static int owner_main(const char *path, const char *len, const char *url)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_engine *e;
	char name[64], c;
	int ret;

	snprintf(name, sizeof(name), "owner-%d", (int)getpid());
	if (!cfg || xfer_config_set(cfg, "bind_addr", "127.0.0.1") ||
	    xfer_config_set(cfg, "workers", "1") ||
	    xfer_config_set(cfg, "local_server_name",
			    strcmp(url, "-") ? name : "127.0.0.1") ||
	    (strcmp(url, "-") && xfer_config_set(cfg, "metadata_server", url)))
		return 2;
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	if (!e)
		return 3;
	ret = xfer_register_file(e, path, strtoull(len, NULL, 10), NULL);
	if (ret) {
		fprintf(stderr, "owner: register %s: %s\n", path,
			xfer_engine_last_error(e));
		return 4;
	}
	printf("%s\n", xfer_engine_name(e));
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	xfer_engine_free(e);
	return 0;
}

void th_owner_start(struct th_owner *o, const char *path, uint64_t len,
		    bool metad)
{
	int in[2], out[2];
	char lens[24];
	FILE *f;

	snprintf(lens, sizeof(lens), "%llu", (unsigned long long)len);
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	o->pid = fork();
	assert_true(o->pid >= 0);
	if (o->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(self, self, "owner", path, lens,
		      metad ? th_metad_url : "-", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	o->ctl = in[1];
	f = fdopen(out[0], "r");
	assert_non_null(f);
	if (!fgets(o->name, sizeof(o->name), f))
		fail_msg("owner of %s did not start", path);
	fclose(f);
	o->name[strcspn(o->name, "\n")] = '\0';
}

void th_owner_stop(struct th_owner *o)
{
	int st;

	close(o->ctl);
	st = th_wait_exit(o->pid, 10000);
	if (st < 0)
		kill(o->pid, SIGKILL);
	assert_true(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void metad_start(void)
{
	uint16_t port = th_free_port();
	char ports[8];
	int64_t t0 = th_now_ms();
	int fd;

	snprintf(ports, sizeof(ports), "%u", port);
	snprintf(th_metad_url, sizeof(th_metad_url),
		 "http://127.0.0.1:%u/metadata", port);
	metad_pid = fork();
	assert_true(metad_pid >= 0);
	if (metad_pid == 0) {
		execl(th_metad_path(), "xfer-metad", "--port", ports,
		      (char *)NULL);
		_exit(127);
	}
	while ((fd = th_connect_try(port)) < 0) {
		assert_true(th_now_ms() - t0 < 20000);
		usleep(20000);
	}
	close(fd);
}

int th_file_main(int argc, char **argv, bool metad, int (*run)(void))
{
	int ret;

	if (argc == 5 && !strcmp(argv[1], "owner"))
		return owner_main(argv[2], argv[3], argv[4]);
	self = "/proc/self/exe";
	snprintf(th_dir, sizeof(th_dir), "/var/tmp/xfer-file.XXXXXX");
	if (!mkdtemp(th_dir))
		return 1;
	if (metad)
		metad_start();
	ret = run();
	if (metad_pid > 0) {
		kill(metad_pid, SIGTERM);
		th_wait_exit(metad_pid, 10000);
	}
	th_rm_tree(th_dir);
	return ret;
}

/* ---- one task's slices, made by hand ---- */

/* A task of @p len bytes in slices of @p slice; it never ends (one slice
 * more than it has), so its slices can be counted. */
struct th_job *th_job_new(enum xfer_opcode op, void *local, uint64_t remote,
			   size_t len, size_t slice)
{
	size_t n = (len + slice - 1) / slice;
	struct th_job *j = calloc(1, sizeof(*j) + n * sizeof(j->s[0]));

	assert_non_null(j);
	j->n = n;
	atomic_init(&j->task.slices_left, n + 1);
	for (size_t i = 0; i < n; i++)
		j->s[i] = (struct xfer_slice){
			.task = &j->task, .opcode = op,
			.len = (uint32_t)(len - i * slice < slice ?
					  len - i * slice : slice),
			.local = (uint8_t *)local + i * slice,
			.remote = remote + i * slice,
		};
	return j;
}

/* Leave a gap of one slice after each slice in the segment, so that no
 * two are adjacent: each goes as a request of its own. */
void th_job_spread(struct th_job *j)
{
	for (size_t i = 1; i < j->n; i++)
		j->s[i].remote = j->s[i - 1].remote + 2 * j->s[i - 1].len;
}

size_t th_job_left(struct th_job *j)
{
	return atomic_load(&j->task.slices_left) - 1;
}

/* Wait until @p left slices are still out (fails after 30 s). */
void th_job_wait_left(struct th_job *j, size_t left)
{
	int64_t end = th_now_ms() + 30000;

	while (th_job_left(j) > left && th_now_ms() < end)
		usleep(1000);
	assert_int_equal(th_job_left(j), left);
}

/* Wait for every slice. @return the first failure, else COMPLETED. */
enum xfer_status th_job_wait(struct th_job *j)
{
	int f;

	th_job_wait_left(j, 0);
	f = atomic_load(&j->task.failure);
	return f ? (enum xfer_status)f : XFER_COMPLETED;
}
