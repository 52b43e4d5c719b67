/*
 * xfer-metad: xfer's own HTTP metadata server (PROTOCOL.md §2).
 *
 *   xfer-metad [--bind ADDR] [--port N] [--path /metadata]
 *              [--persist FILE] [--port-file FILE] [--max-value-bytes N]
 *              [--max-keys N] [--max-bytes N]
 *
 * One thread and one event_base: evhttp serves the keys and the watch
 * (http.c) from the store (store.c, key.c), kept in an SQLite database
 * (db.c) with --persist, into which an old persist file is migrated at
 * start (migrate.c, legacy.c); SIGINT or SIGTERM ends the loop and the
 * program exits 0.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "metadata/metad/http_internal.h"
#include "metadata/metad/store_internal.h"

struct options {
	const char *bind;
	uint16_t port;
	const char *path;
	const char *persist;
	const char *port_file;
	struct metad_limits limits;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: xfer-metad [--bind ADDR] [--port N] [--path PATH]\n"
"                  [--persist FILE] [--port-file FILE]\n"
"                  [--max-value-bytes N] [--max-keys N] [--max-bytes N]\n"
"  --bind ADDR       address to listen on (127.0.0.1)\n"
"  --port N          port, 0 for a free one (8080)\n"
"  --path PATH       keys at PATH?key=K, the watch at PATH/watch (/metadata)\n"
"  --persist FILE    keep the store in FILE, an SQLite database, each change\n"
"                    on disk before it is answered (default: memory only);\n"
"                    an old persist file there is migrated at start\n"
"  --port-file FILE  also write the port to FILE once listening\n"
"  --max-value-bytes N  longest value, else 413 (16M; at most 512M)\n"
"  --max-keys N      most keys, else 507 (1000000)\n"
"  --max-bytes N     most bytes of keys and values together, else 507 (1G)\n"
"  N: a decimal, with K, M or G for 2^10, 2^20, 2^30\n");
}

/* A count or size for a --max-* flag: digits and maybe K, M or G; from
 * 1 to @p max. @return 0, or -EINVAL. */
static int parse_limit(const char *s, uint64_t max, uint64_t *v)
{
	unsigned shift = 0;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	if (shift)
		end++;
	if (*end || *v > (max >> shift))
		return -EINVAL;
	*v <<= shift;
	return *v ? 0 : -EINVAL;
}

/* @return 0 to run, or the exit status (0 after --help). */
static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "bind", required_argument, NULL, 'b' },
		{ "port", required_argument, NULL, 'p' },
		{ "path", required_argument, NULL, 'P' },
		{ "persist", required_argument, NULL, 'f' },
		{ "port-file", required_argument, NULL, 'o' },
		{ "max-value-bytes", required_argument, NULL, 'V' },
		{ "max-keys", required_argument, NULL, 'K' },
		{ "max-bytes", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long port;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			o->bind = optarg;
			break;
		case 'p':
			errno = 0;
			port = strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || errno ||
			    port > 65535) {
				fprintf(stderr, "xfer-metad: bad port '%s'\n",
					optarg);
				return 2;
			}
			o->port = (uint16_t)port;
			break;
		case 'P':
			if (optarg[0] != '/' || strpbrk(optarg, "?# ") ||
			    (optarg[1] && optarg[strlen(optarg) - 1] == '/')) {
				fprintf(stderr, "xfer-metad: bad path '%s': it "
					"must start with '/', not end with "
					"one, and hold no '?', '#' or ' '\n",
					optarg);
				return 2;
			}
			o->path = optarg;
			break;
		case 'f':
			o->persist = optarg;
			break;
		case 'o':
			o->port_file = optarg;
			break;
		case 'V':
			if (parse_limit(optarg, METAD_VALUE_BYTES_MAX,
					&o->limits.value_bytes))
				goto err_limit;
			break;
		case 'K':
			if (parse_limit(optarg, UINT64_MAX, &o->limits.keys))
				goto err_limit;
			break;
		case 'B':
			if (parse_limit(optarg, UINT64_MAX, &o->limits.bytes))
				goto err_limit;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xfer-metad: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	return 0;

err_limit:
	fprintf(stderr, "xfer-metad: bad --max-%s '%s': a number from 1%s, "
		"maybe with K, M or G\n", c == 'V' ? "value-bytes" :
		c == 'K' ? "keys" : "bytes", optarg, c == 'V' ? " to 512M" : "");
	return 2;
}

/* Write "PORT\n" to @p path by way of a renamed temporary file, so that
 * a reader polling for it never sees half of it. */
static int write_port_file(const char *path, uint16_t port)
{
	size_t len = strlen(path);
	char *tmp = malloc(len + sizeof(".tmp"));
	FILE *f;
	int ret = -1;

	if (!tmp)
		return -1;
	memcpy(tmp, path, len);
	memcpy(tmp + len, ".tmp", sizeof(".tmp"));
	f = fopen(tmp, "w");
	if (f) {
		ret = fprintf(f, "%u\n", port) < 0 ? -1 : 0;
		if (fclose(f))
			ret = -1;
		if (!ret && rename(tmp, path))
			ret = -1;
		if (ret)
			unlink(tmp);
	}
	free(tmp);
	return ret;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopbreak(arg);
}

int main(int argc, char **argv)
{
	struct options o = {
		.bind = "127.0.0.1",
		.port = 8080,
		.path = "/metadata",
		.limits = {
			.value_bytes = METAD_VALUE_BYTES_DEFAULT,
			.keys = METAD_KEYS_DEFAULT,
			.bytes = METAD_BYTES_DEFAULT,
		},
	};
	struct event *sigint = NULL, *sigterm = NULL;
	struct metad_store *store;
	struct event_base *base;
	struct metad_http *h;
	char err[512];
	uint16_t port;
	int ret;

	ret = parse_args(argc, argv, &o);
	if (ret)
		return ret < 0 ? 0 : ret;
	ret = 1;
	/* a client gone before its answer is written must not end us */
	signal(SIGPIPE, SIG_IGN);

	store = metad_store_open(o.persist, &o.limits, err, sizeof(err));
	if (!store) {
		fprintf(stderr, "xfer-metad: %s\n", err);
		return 1;
	}
	base = event_base_new();
	if (!base) {
		fprintf(stderr, "xfer-metad: cannot make an event_base\n");
		goto err_store;
	}
	h = metad_http_new(base, store, o.path);
	if (!h) {
		fprintf(stderr, "xfer-metad: %s\n", strerror(errno));
		goto err_base;
	}
	sigint = evsignal_new(base, SIGINT, on_signal, base);
	sigterm = evsignal_new(base, SIGTERM, on_signal, base);
	if (!sigint || !sigterm || evsignal_add(sigint, NULL) ||
	    evsignal_add(sigterm, NULL)) {
		fprintf(stderr, "xfer-metad: cannot catch signals\n");
		goto err_signals;
	}
	if (metad_http_bind(h, o.bind, o.port, &port)) {
		fprintf(stderr, "xfer-metad: cannot listen on %s:%u: %s\n",
			o.bind, o.port, strerror(errno));
		goto err_signals;
	}
	printf("xfer-metad: listening on %s:%u\n", o.bind, port);
	fflush(stdout);
	if (o.port_file && write_port_file(o.port_file, port)) {
		fprintf(stderr, "xfer-metad: cannot write %s: %s\n",
			o.port_file, strerror(errno));
		goto err_signals;
	}

	if (event_base_dispatch(base) == 0)
		ret = 0;

err_signals:
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	metad_http_free(h);
err_base:
	event_base_free(base);
err_store:
	metad_store_free(store);
	return ret;
}
