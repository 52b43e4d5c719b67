/*
 * What the file segment tests (test/it_file*.c) share: files made and
 * read back independently of the engine, an owner engine in another
 * process (this program run again as "owner"), xfer-metad, and engines
 * that open a file segment with the file transport's knobs.
 */
#ifndef XFER_TEST_TH_FILE_H
#define XFER_TEST_TH_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The engine that owns the file, in a child process. */
struct th_owner {
	pid_t pid;
	int ctl;            /* its stdin: closing it stops it */
	char name[128];     /* its engine name */
};

/* How an initiator reaches the file: xfer-metad or p2p, its own files or
 * through the owner, io_uring or the worker thread. */
struct th_mode {
	const char *what;
	bool metad, local, threads;
};

/** The scratch folder on disk (O_DIRECT works there), made by
 *  th_file_main() and removed at its end. */
extern char th_dir[];

/** The URL of the xfer-metad th_file_main() started when asked. */
extern char th_metad_url[];

/**
 * main() of an it_file program: as "owner PATH LENGTH URL|-" it is the
 * owner engine (registers PATH, prints its name, serves until stdin
 * closes); else it makes th_dir, starts xfer-metad if @p metad, runs
 * @p run() and cleans up. @return the exit status.
 */
int th_file_main(int argc, char **argv, bool metad, int (*run)(void));

/** Create @p path of @p len bytes, filled with th_fill(@p seed). */
void th_file_make(const char *path, size_t len, uint64_t seed);

/** pread @p len bytes at @p off of @p path (fails the test if short). */
void th_file_read(const char *path, uint64_t off, void *buf, size_t len);

/** FNV-1a of the whole of @p path. */
uint64_t th_file_sum(const char *path);

/** Start the owner of @p path (@p len bytes registered), p2p or through
 *  th_metad_url; returns once its file is published. */
void th_owner_start(struct th_owner *o, const char *path, uint64_t len,
		    bool metad);

/** Stop it and expect a clean exit. */
void th_owner_stop(struct th_owner *o);

/** An engine for @p m with one worker; fails the test if not made. */
struct xfer_engine *th_file_engine(const struct th_mode *m);

/** Open "nvmeof/<@p owner>" from @p e; fails the test if it does not. */
int64_t th_file_open(struct xfer_engine *e, const char *owner);

/* ---- one task's slices, made by hand (a transport's tests) ---- */

#include "xfer/xfer.h"
#include "core/slice_internal.h"

struct th_job {
	struct xfer_task task;
	size_t n;
	struct xfer_slice s[];
};

/** A task of @p len bytes in slices of @p slice; it never ends (one slice
 *  more than it has), so its slices can be counted. Free with free(). */
struct th_job *th_job_new(enum xfer_opcode op, void *local, uint64_t remote,
			  size_t len, size_t slice);

/** Leave a gap of one slice after each slice in the segment, so that no
 *  two are adjacent: each goes as a request of its own. */
void th_job_spread(struct th_job *j);

/** Slices of @p j still out. */
size_t th_job_left(struct th_job *j);

/** Wait until @p left slices are still out (fails after 30 s). */
void th_job_wait_left(struct th_job *j, size_t left);

/** Wait for every slice. @return the first failure, else COMPLETED. */
enum xfer_status th_job_wait(struct th_job *j);

#endif
