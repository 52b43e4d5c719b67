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
