#!/bin/sh
# Install every Debian package the build, the tests and the benchmark need.
# make fuzz: clang, libFuzzer's runtime (libclang-rt-14-dev, clang 14 being
# Debian 12's) and llvm (llvm-symbolizer, for readable reports); make
# test-asan uses gcc's sanitizers (build-essential).
set -e
# redis-server runs the tests' servers and their sentinels too
# (redis-server --sentinel: the redis-sentinel package only adds a service);
# etcd-server and etcd-client, their etcd clusters and etcdctl; linux-perf,
# bench/rdma_profile.sh; gnuplot-nox, the pictures of bench/sweep.sh.
PKGS="build-essential pkg-config libevent-dev libyajl-dev libhiredis-dev libssl-dev libcmocka-dev libsqlite3-dev libibverbs-dev libnuma-dev liburing-dev rdma-core ibverbs-providers ibverbs-utils perftest linux-perf numactl time redis-server etcd-server etcd-client iperf3 sockperf fio iproute2 python3 doxygen python3-dev python3-setuptools python3-pip python3-venv python3-pytest python3-numpy gnuplot-nox clang libclang-rt-14-dev llvm"
missing=""
for p in $PKGS; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ -n "$missing" ]; then
	echo "setup: installing$missing"
	$SUDO apt-get update -q
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi
# The RDMA tier runs in QEMU guests with Soft-RoCE: rdmavm installs them.
RDMAVM=${RDMAVM:-../shared/rdmavm/rdmavm}
if [ -x "$RDMAVM" ]; then
	$SUDO "$RDMAVM" setup
else
	echo "setup: $RDMAVM not found; the RDMA tier will be skipped"
fi
