#!/bin/sh
# Inside a guest: the programs of topology $1, stopping at the first failure.
set -e
ulimit -l unlimited
ls build/test/rdma/rt_"$1"* >/dev/null
for t in build/test/rdma/rt_"$1"*; do
	case $t in *.*) continue ;; esac
	echo "== $t"
	"$t"
done
# Mooncake's C API: two processes over rxe0 (test/capi_pair.c), and
# installTransport("rdma") on running engines, auto discovery (capi_api.c)
if [ "$1" = lo ]; then
	echo "== build/test/capi_pair --rdma"
	build/test/capi_pair --rdma
	echo "== build/test/capi_api"
	build/test/capi_api
fi
