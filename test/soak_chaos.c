/*
 * The soak's other processes (test/soak.c): the peers, this program run
 * with --peer, and xfer-metad, started, killed and restarted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/soak.h"

/* ---- a peer process ---- */

static volatile sig_atomic_t peer_stop;

static void on_term(int sig)
{
	(void)sig;
	peer_stop = 1;
}

/*
 * Register the patterned buffer, say "ready" on stdout, then churn small
 * buffers until stdin closes (the soak is over) or SIGTERM.
 */
int soak_peer_main(int index, const char *url)
{
	struct sigaction sa = { .sa_handler = on_term };
	uint64_t state = (uint64_t)getpid();
	struct xfer_engine *e;
	char name[32], c;
	uint8_t *buf;
	int ret;

	sigaction(SIGTERM, &sa, NULL);
	/* read() below only looks for the EOF */
	fcntl(STDIN_FILENO, F_SETFL, O_NONBLOCK);
	snprintf(name, sizeof(name), "soak-peer-%d", index);
	e = soak_engine_new(url, name, 1);
	buf = soak_alloc(PEER_LEN);
	if (!e || !buf) {
		fprintf(stderr, "soak peer %d: cannot start: %s\n", index,
			strerror(errno));
		return 2;
	}
	soak_fill_words(buf, PEER_LEN, (uint64_t)index);
	/* xfer-metad may be restarting: a publish it missed is retried */
	ret = xfer_register(e, buf, PEER_LEN, "cpu:0", true);
	if (ret) {
		fprintf(stderr, "soak peer %d: register: %s\n", index,
			strerror(-ret));
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	while (!peer_stop) {
		size_t len = 4096 * (1 + soak_rnd(&state) % 64);
		uint8_t *extra = soak_alloc(len);
		struct timespec ts = { 0, (long)(20 + soak_rnd(&state) % 200) *
					  1000000 };

		if (!extra)
			break;
		ret = xfer_register(e, extra, len, "cpu:0", true);
		nanosleep(&ts, NULL);
		if (!ret && (ret = th_unregister(e, extra))) {
			fprintf(stderr, "soak peer %d: unregister: %s\n", index,
				strerror(-ret));
			return 3;
		}
		free(extra);
		/* the soak closes our stdin when it is done */
		if (read(STDIN_FILENO, &c, 1) == 0)
			break;
	}
	ret = th_unregister(e, buf);
	xfer_engine_free(e);
	free(buf);
	return ret ? 3 : 0;
}

/* ---- the soak's side ---- */

/* Start xfer-metad on soak.metad_port (0 the first time: any). */
int soak_metad_start(void)
{
	char port_file[PATH_MAX + 16], ports[8], buf[16] = "";
	int64_t end = th_now_ms() + 20000;
	FILE *f;
	pid_t pid;

	snprintf(port_file, sizeof(port_file), "%s/port", soak.dir);
	snprintf(ports, sizeof(ports), "%u", soak.metad_port);
	unlink(port_file);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(th_metad_path(), "xfer-metad", "--port", ports,
		      "--persist", soak.persist, "--port-file", port_file,
		      (char *)NULL);
		_exit(127);
	}
	soak.metad_pid = pid;
	while (th_now_ms() < end) {
		f = fopen(port_file, "r");
		if (f && fgets(buf, sizeof(buf), f)) {
			fclose(f);
			soak.metad_port = (uint16_t)atoi(buf);
			return 0;
		}
		if (f)
			fclose(f);
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			soak.metad_pid = 0;
			return -ECHILD;
		}
		usleep(10000);
	}
	return -ETIMEDOUT;
}

/* Stop xfer-metad with @p sig; an exit of its own other than 0 after
 * SIGTERM (a sanitizer's report) is an error. */
void soak_metad_stop(int sig)
{
	int st;

	if (!soak.metad_pid)
		return;
	kill(soak.metad_pid, sig);
	st = th_wait_exit(soak.metad_pid, 20000);
	if (st < 0)
		soak_error("xfer-metad did not exit: %s", strerror(-st));
	else if (sig == SIGTERM && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		soak_error("xfer-metad ended with status %#x after SIGTERM", st);
	else if (sig == SIGKILL && !(WIFSIGNALED(st) &&
				     WTERMSIG(st) == SIGKILL))
		soak_error("xfer-metad ended with status %#x before SIGKILL", st);
	soak.metad_pid = 0;
}

/* Start peer @p i and wait for its "ready". Under the peer's lock. */
int soak_peer_start(int i)
{
	struct soak_peer *p = &soak.peers[i];
	char idx[16], line[16] = "";
	int in[2], out[2];
	FILE *f;
	pid_t pid;

	snprintf(idx, sizeof(idx), "%d", i);
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execl(soak.self, "soak", "--peer", idx, soak.url, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->pid = pid;
	p->to_child = in[1];
	f = fdopen(out[0], "r");
	if (!f || !fgets(line, sizeof(line), f) || strcmp(line, "ready\n")) {
		if (f)
			fclose(f);
		else
			close(out[0]);
		return -EPROTO;
	}
	fclose(f);
	return 0;
}

/* Wait for the end of peer @p i, sent @p sig (0: asked to exit by
 * closing its stdin). Under the peer's lock. */
void soak_peer_stop_wait(int i, int sig)
{
	struct soak_peer *p = &soak.peers[i];
	int st;

	if (sig)
		kill(p->pid, sig);
	close(p->to_child);
	st = th_wait_exit(p->pid, 30000);
	if (st < 0) {
		soak_error("peer %d did not exit: %s", i, strerror(-st));
		kill(p->pid, SIGKILL);
		th_wait_exit(p->pid, 5000);
	} else if (!sig && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		soak_error("peer %d ended with status %#x", i, st);
	} else if (sig && !(WIFSIGNALED(st) && WTERMSIG(st) == sig)) {
		soak_error("peer %d died on its own (status %#x)", i, st);
	}
	p->pid = 0;
}

/* Refresh peer @p i's segment until it answers (xfer-metad restarts). */
static int refresh(int i)
{
	int64_t end = th_now_ms() + 30000;
	int ret;

	while ((ret = xfer_segment_refresh(soak.e, soak.peers[i].seg)) &&
	       th_now_ms() < end)
		usleep(50000);
	return ret;
}

static void restart_peer(int i)
{
	struct soak_peer *p = &soak.peers[i];
	int ret;

	pthread_mutex_lock(&p->lock);
	atomic_fetch_add(&p->epoch, 1);           /* odd: going down */
	soak_peer_stop_wait(i, SIGKILL);
	atomic_fetch_add(&soak.n.peer_kills, 1);
	ret = soak_peer_start(i);
	if (!ret)
		ret = refresh(i);
	if (ret)
		soak_error("peer %d did not come back: %s", i, strerror(-ret));
	else
		atomic_fetch_add(&p->epoch, 1);   /* even: up again */
	pthread_mutex_unlock(&p->lock);
}

static void restart_metad(uint64_t *state)
{
	int sig = soak_rnd(state) & 1 ? SIGKILL : SIGTERM;
	int ret;

	soak_metad_stop(sig);
	usleep((useconds_t)(soak_rnd(state) % 500) * 1000); /* down a while */
	ret = soak_metad_start();
	if (ret)
		soak_error("xfer-metad did not come back: %s", strerror(-ret));
	atomic_fetch_add(&soak.n.metad_restarts, 1);
}

static void sleep_ms(int64_t ms)
{
	int64_t end = th_now_ms() + ms;

	while (!atomic_load(&soak.stop) && th_now_ms() < end)
		usleep(20000);
}

/*
 * Kill and restart until @p end_ms. On the main thread: the children it
 * forks die with it (PR_SET_PDEATHSIG follows the forking thread, not
 * the process).
 */
void soak_chaos(int64_t end_ms)
{
	uint64_t state = 77;
	int64_t next_metad = th_now_ms() + METAD_KILL_MS, next;

	for (;;) {
		next = th_now_ms() + PEER_KILL_MS / 2 +
		       (int64_t)(soak_rnd(&state) % PEER_KILL_MS);
		if (next > end_ms)
			next = end_ms;
		sleep_ms(next - th_now_ms());
		if (th_now_ms() >= end_ms)
			break;
		if (th_now_ms() >= next_metad) {
			restart_metad(&state);
			next_metad = th_now_ms() + METAD_KILL_MS;
		} else {
			restart_peer((int)(soak_rnd(&state) % PEERS));
		}
	}
}
