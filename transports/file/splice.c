/*
 * File transport, owner side, files in memory (tmpfs, ramfs): a request
 * moves between the socket and the file's pages with one copy, where
 * the bounce path makes two, and no bounce memory. A READ's pages go to
 * the socket with sendfile(), which references them (the receiving
 * socket makes the copy); a WRITE's payload is spliced from the socket
 * into the transport's pipe (references to the socket's pages) and on
 * into the file (the copy). Every call leaves the pipe empty, so one
 * pipe serves every connection on t->r. On the loopback (1 MiB
 * requests) the owner spends here about 40% of the bounce path's CPU
 * per byte for a READ, 60% for a WRITE.
 */
#define _GNU_SOURCE /* splice, F_SETPIPE_SZ */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transports/file/sconn_internal.h"

int xfer_file_pipe_get(struct file_transport *t)
{
	int cap;

	if (t->pipe_cap)
		return 0;
	if (pipe2(t->pipe, O_NONBLOCK | O_CLOEXEC))
		return -1;
	/* a piece per splice, where the system lets a pipe be that large */
	(void)fcntl(t->pipe[1], F_SETPIPE_SZ, (int)XFER_FILE_PIECE);
	cap = fcntl(t->pipe[1], F_GETPIPE_SZ);
	if (cap > 0) {
		t->pipe_cap = (size_t)cap;
		return 0;
	}
	close(t->pipe[0]);
	close(t->pipe[1]);
	return -1;
}

void xfer_file_pipe_drop(struct file_transport *t)
{
	if (!t->pipe_cap)
		return;
	close(t->pipe[0]);
	close(t->pipe[1]);
	t->pipe_cap = 0;
}

/*
 * sendfile() has no MSG_NOSIGNAL: to a peer gone it raises SIGPIPE for
 * the thread, unless the thread blocks it (the engine's threads do; an
 * application's base in plugin mode may not): blocked for the call, and
 * one the call raised taken before the mask is as it was.
 */
static ssize_t send_file(int sock, int fd, uint64_t off, size_t len)
{
	static const struct timespec now = { 0, 0 };
	sigset_t pipe_set, old;
	off_t o = (off_t)off;
	ssize_t n;
	int err;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	n = sendfile(sock, fd, &o, len);
	err = errno;
	if (!sigismember(&old, SIGPIPE)) {
		if (n < 0 && err == EPIPE)
			(void)sigtimedwait(&pipe_set, NULL, &now);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	errno = err;
	return n;
}

void xfer_file_splice_start(struct file_sconn *c)
{
	struct stat st;
	int err = 0;

	c->splice = true;
	c->got = 0;
	if (c->write) {
		c->state = S_PAYLOAD;
		return;
	}
	if (fstat(c->fo->fd, &st))
		err = errno;
	else if ((uint64_t)st.st_size < c->off + c->size)
		err = ENODATA;
	if (err) {
		uint32_t code = sconn_io_failed(c, err, c->size, c->off);

		sconn_put_file(c);
		sconn_reply(c, code);
		return;
	}
	sconn_put_status(c, FILE_STATUS_OK);
	c->answered = true;
	c->state = S_REPLY;
}

ssize_t xfer_file_splice_send(struct file_sconn *c)
{
	ssize_t n;

	if (c->status_left) { /* the pages follow at once */
		n = send(c->s.fd, c->status + 8 - c->status_left,
			 c->status_left, MSG_NOSIGNAL | MSG_MORE);
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		c->status_left -= (size_t)n;
		return n;
	}
	n = send_file(c->s.fd, c->fo->fd, c->off + c->done, c->size - c->done);
	/* 0: the file ends sooner than it did */
	if (n <= 0)
		return n < 0 && errno == EAGAIN ? 0 : -1;
	c->done += (size_t)n;
	if (c->done == c->size)
		sconn_request_end(c);
	return n;
}

ssize_t xfer_file_splice_recv(struct file_sconn *c)
{
	struct file_transport *t = c->t;
	size_t left;
	ssize_t n, m = 0;

	n = splice(c->s.fd, NULL, t->pipe[1], NULL,
		   sconn_min(c->size - c->done, t->pipe_cap),
		   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n == 0)
		return -1;
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	for (left = (size_t)n; left; left -= (size_t)m) {
		loff_t off = (loff_t)(c->off + c->done);

		m = splice(t->pipe[0], NULL, c->fo->fd, &off, left,
			   SPLICE_F_MOVE);
		if (m <= 0)
			break;
		c->done += (size_t)m;
	}
	if (left) {
		c->code = sconn_io_failed(c, m ? errno : EIO, left,
					  c->off + c->done);
		xfer_file_pipe_drop(t);
		c->done += left;
		c->splice = false;
		c->drain = true;
	}
	if (c->done == c->size) {
		sconn_put_file(c);
		sconn_reply(c, c->code);
	}
	return n;
}

