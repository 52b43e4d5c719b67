/*
 * The reactor (reactor/reactor.c) on a thread of its own: jobs posted from
 * other threads run there in posting order, and a write that raises
 * SIGPIPE on that thread (a peer gone, no MSG_NOSIGNAL: what libevent's
 * bufferevents and hiredis do) fails with EPIPE instead of ending the
 * process.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "reactor/reactor_internal.h"

#define NJOBS 1000

struct numbered {
	struct xfer_job job;
	int n;
};

static int ran[NJOBS], nran;
static bool off_thread;
static pthread_t reactor_thread;

static void note(struct xfer_job *j)
{
	struct numbered *x = container_of(j, struct numbered, job);

	off_thread |= !pthread_equal(pthread_self(), reactor_thread);
	ran[nran] = x->n;
	__atomic_store_n(&nran, nran + 1, __ATOMIC_RELEASE);
}

/* Until *@p counter reaches @p n, or 5 s. */
static void wait_for(int *counter, int n)
{
	for (int i = 0; i < 5000 &&
			__atomic_load_n(counter, __ATOMIC_ACQUIRE) < n; i++)
		usleep(1000);
}

static void test_jobs_in_order(void **state)
{
	static struct numbered jobs[NJOBS];
	struct xfer_reactor r;

	(void)state;
	assert_int_equal(xfer_reactor_init(&r, NULL, "unit"), 0);
	assert_int_equal(xfer_reactor_start(&r), 0);
	reactor_thread = r.thread;
	for (int i = 0; i < NJOBS; i++) {
		jobs[i] = (struct numbered){ .job.fn = note, .n = i };
		xfer_reactor_post(&r, &jobs[i].job);
	}
	wait_for(&nran, NJOBS);
	xfer_reactor_stop(&r);
	xfer_reactor_destroy(&r);
	assert_int_equal(nran, NJOBS);
	assert_false(off_thread);
	for (int i = 0; i < NJOBS; i++)
		assert_int_equal(ran[i], i);
}

struct pipe_write {
	struct xfer_job job;
	int fd;
	int err;      /* errno of the write, or 0 */
	int done;
};

static void write_to_gone_peer(struct xfer_job *j)
{
	struct pipe_write *w = container_of(j, struct pipe_write, job);

	w->err = write(w->fd, "x", 1) < 0 ? errno : 0;
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
}

static void test_sigpipe_blocked(void **state)
{
	struct pipe_write w = { .job.fn = write_to_gone_peer };
	struct xfer_reactor r;
	int sv[2];

	(void)state;
	signal(SIGPIPE, SIG_DFL); /* the process would end */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	w.fd = sv[0];
	assert_int_equal(xfer_reactor_init(&r, NULL, "unit"), 0);
	assert_int_equal(xfer_reactor_start(&r), 0);
	xfer_reactor_post(&r, &w.job);
	wait_for(&w.done, 1);
	xfer_reactor_stop(&r);
	xfer_reactor_destroy(&r);
	close(sv[0]);
	assert_int_equal(w.done, 1);
	assert_int_equal(w.err, EPIPE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs_in_order),
		cmocka_unit_test(test_sigpipe_blocked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
