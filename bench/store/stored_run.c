/* The store benches' master (stored_run.h). */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/store/stored_run.h"
#include "util/net_internal.h"

pid_t bench_stored_start(const char *flag, char *addr, size_t len,
			 char *err, size_t errlen)
{
	char self[PATH_MAX], prog[PATH_MAX + 16], port_flag[32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct sockaddr_storage ss;
	socklen_t sl;
	uint16_t port;
	pid_t pid;
	int fd;

	if (n <= 0) {
		snprintf(err, errlen, "cannot find this program's folder");
		return -1;
	}
	self[n] = 0;
	snprintf(prog, sizeof(prog), "%s/xfer-stored", dirname(self));
	/* a port free a moment ago */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || xfer_net_parse("127.0.0.1", 0, &ss, &sl) ||
	    bind(fd, (struct sockaddr *)&ss, sl)) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "no free port");
		return -1;
	}
	port = xfer_net_local_port(fd);
	close(fd);
	xfer_net_set_port(&ss, port);
	snprintf(port_flag, sizeof(port_flag), "--port=%u", port);
	snprintf(addr, len, "127.0.0.1:%u", port);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	if (!pid) {
		if (!freopen("/dev/null", "w", stdout))
			_exit(127);
		execl(prog, prog, port_flag, "--rpc_address=127.0.0.1",
		      "--metrics_port=0", flag, (char *)0);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, (struct sockaddr *)&ss, sl)) {
			close(fd);
			return pid;
		}
		if (fd >= 0)
			close(fd);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	snprintf(err, errlen, "%s did not serve", prog);
	return -1;
}
