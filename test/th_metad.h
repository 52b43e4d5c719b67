/*
 * What the xfer-metad tests (test/it_metad*.c) share: the server program
 * started and stopped, a small HTTP/1.1 client, and watch answers parsed.
 * Linked into those programs only (mk/test.mk: test/th_NAME.c goes with
 * test/it_NAME*.c).
 *
 * XFER_TEST_WRAP puts a command in front of the server, e.g.
 *   XFER_TEST_WRAP="valgrind -q --error-exitcode=9 --leak-check=full" \
 *       build/test/it_metad
 */
#ifndef XFER_TEST_TH_METAD_H
#define XFER_TEST_TH_METAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <yajl/yajl_tree.h>

#define IO_MS 10000         /* the most any one answer may take */
#define START_MS 30000      /* the server up, or down (valgrind is slow) */

struct server {
	pid_t pid;
	uint16_t port;
};

/* A client connection; bytes read past one answer wait in buf. */
struct conn {
	int fd;
	char *buf;
	size_t len, cap;
};

struct resp {
	int status;
	char ctype[128];
	char *body;         /* len bytes, plus a NUL for convenience */
	size_t len;
};

/** The program's scratch folder (port file, server output, persist
 *  files): a mkdtemp() template, made by main() and removed at its end. */
extern char tmp_dir[];

/** asprintf() that fails the test instead of returning NULL. */
char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

/* --- the server program ---------------------------------------------- */

/** Fork build/xfer-metad on a free port (--port 0, --port-file in
 *  tmp_dir), with @p persist if given, its stderr to @p err_file if
 *  given. @return its pid. */
pid_t spawn(const char *persist, const char *err_file);

/** spawn() with the NULL-ended flags @p args (NULL: none) added. */
pid_t spawn_args(const char *persist, const char *err_file,
		 const char *const *args);

/** All of @p path, NUL-ended, malloc'd; its length in *len if not NULL. */
char *read_file(const char *path, size_t *len);

/** Replace @p path with @p len bytes of @p data. */
void write_file(const char *path, const void *data, size_t len);

/** Start a server and learn its port from --port-file (and stdout); its
 *  stderr goes to @p err_file if given. */
void server_start(struct server *s, const char *persist,
		  const char *err_file);

/** server_start() with the NULL-ended flags @p args (NULL: none). */
void server_start_args(struct server *s, const char *persist,
		       const char *err_file, const char *const *args);

/** Wait up to START_MS for @p pid to end. @return its wait status. */
int reap(pid_t pid);

/** Send @p sig and reap. @return the wait status. */
int server_stop(struct server *s, int sig);

/** A server a failed test may have left up: SIGKILL and reap it (none
 *  running is fine). For cmocka teardowns. */
void server_kill(struct server *s);

void assert_exit_0(int status);

/** Open fds of process @p pid. */
int fd_count(pid_t pid);

/** Wait up to 2 s for @p pid to have at most @p want open fds.
 *  @return the last count. */
int wait_fds(pid_t pid, int want);

/* --- a small HTTP/1.1 client ------------------------------------------ */

struct conn conn_open(uint16_t port);
void conn_close(struct conn *c);

/** th_send_all() that fails the test on an error. */
void send_all(int fd, const void *data, size_t len);

/** Send one request with a Content-Length body of @p len bytes. */
void http_send(struct conn *c, const char *method, const char *target,
	       const void *body, size_t len);

/** http_send() with @p headers ("Name: value\r\n" lines; NULL: none)
 *  after the Host header. */
void http_send_hdr(struct conn *c, const char *method, const char *target,
		   const char *headers, const void *body, size_t len);

/** Read one answer (status, Content-Type, Content-Length body); fails
 *  the test if none comes within @p timeout_ms. Free r->body. */
void http_recv(struct conn *c, struct resp *r, int timeout_ms);

/** One request on a connection of its own. */
struct resp req1(uint16_t port, const char *method, const char *target,
		 const void *body, size_t len);

/** req1() that only checks the status. */
void req_status(uint16_t port, const char *method, const char *target,
		const void *body, size_t len, int status);

/** "/metadata?key=" and @p key percent-encoded (all but unreserved). */
char *key_target(const char *key);

/** PUT @p len bytes of @p val at @p key; fails the test unless 200. */
void put_key(uint16_t port, const char *key, const void *val, size_t len);

/** GET @p key and check it holds exactly @p len bytes at @p val. */
void check_key(uint16_t port, const char *key, const void *val, size_t len);

/* --- watch answers ----------------------------------------------------- */

struct watch {
	yajl_val root;      /* free with yajl_tree_free() */
	uint64_t revision;
	bool compacted;
	yajl_val *events;
	size_t n;
};

/** Parse a watch answer and check its shape. */
struct watch watch_parse(const struct resp *r);

/** Check that event @p i of @p w is @p revision, @p type and @p key. */
void event_check(const struct watch *w, size_t i, uint64_t revision,
		 const char *type, const char *key);

/** The target of a watch of @p prefix after @p since; malloc'd. */
char *watch_target(const char *prefix, uint64_t since, int timeout_ms);

/** One watch on a connection of its own. */
struct resp watch1(uint16_t port, const char *prefix, uint64_t since,
		   int timeout_ms);

/** The server's revision: a watch with timeout 0 always answers. */
uint64_t current_rev(uint16_t port);

#endif
