#!/bin/sh
# The Python case of the RDMA tier: python/tests/rdma_lo.py in an rdmavm
# guest (--topo lo, rxe0). Skips, saying why, as test/rdma/run.sh does.
RDMAVM=${RDMAVM:-../shared/rdmavm/rdmavm}
PYTHON=${PYTHON:-python3}
skip() { echo "SKIP rdma python: $*"; exit 0; }
[ -x "$RDMAVM" ] || skip "$RDMAVM not found (set RDMAVM)"
command -v qemu-system-x86_64 >/dev/null || skip "QEMU missing (make setup)"
ls /boot/vmlinuz-* >/dev/null 2>&1 || skip "no kernel in /boot (make setup)"
echo "== rdma tier: python over rxe0 (--topo lo)"
exec "$RDMAVM" run --topo lo --timeout 600 -- \
	sh -c "ulimit -l unlimited && $PYTHON python/tests/rdma_lo.py"
