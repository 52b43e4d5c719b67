#!/bin/sh
# Install every Debian package the build, the tests and the benchmark need.
set -e
PKGS="build-essential pkg-config libevent-dev libyajl-dev libhiredis-dev libcmocka-dev redis-server etcd-server etcd-client iperf3 iproute2 python3"
missing=""
for p in $PKGS; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "setup: installing$missing"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
