#!/bin/sh
# The RDMA tier: boots rdmavm guests with Soft-RoCE and runs the rt_*
# programs there: --topo lo (with two NUMA nodes), then --topo pair.
RDMAVM=${RDMAVM:-../shared/rdmavm/rdmavm}
skip() { echo "SKIP rdma tier: $*"; exit 0; }
[ -x "$RDMAVM" ] || skip "$RDMAVM not found (set RDMAVM)"
command -v qemu-system-x86_64 >/dev/null || skip "QEMU missing (make setup)"
ls /boot/vmlinuz-* >/dev/null 2>&1 || skip "no kernel in /boot (make setup)"
set -e
echo "== rdma tier: --topo lo --numa"
"$RDMAVM" run --topo lo --numa --timeout 900 -- sh test/rdma/guest.sh lo
echo "== rdma tier: --topo pair"
"$RDMAVM" run --topo pair --timeout 900 -- sh test/rdma/guest.sh pair
