#!/bin/sh
# RDMA speed against perftest, in one rdmavm guest over rxe0: ib_write_bw
# and ib_read_bw at 64 KiB, then xfer-bench rdma write and read at 64 KiB,
# batch 128; prints the ratios (target >= 0.9) and xfer's CPU s/GB.
# Run from the repository root after `make`: bench/rdma_speed.sh
set -e
if [ "$1" != --in-guest ]; then
	RDMAVM=${RDMAVM:-../shared/rdmavm/rdmavm}
	[ -x "$RDMAVM" ] || { echo "rdma_speed: $RDMAVM not found" >&2; exit 2; }
	command -v ib_write_bw >/dev/null || { echo "rdma_speed: perftest missing (make setup)" >&2; exit 2; }
	exec "$RDMAVM" run --topo lo -- sh bench/rdma_speed.sh --in-guest
fi
ulimit -l unlimited
out=/tmp/rdma_speed

# perftest: server in the background, client here. It busy-polls its CQ,
# so its CPU is a core per process for the run; only xfer's is measured.
perf() {
	"$1" -d rxe0 -x 1 -s 65536 -D 5 >/dev/null 2>&1 &
	srv=$!
	sleep 1
	"$1" -d rxe0 -x 1 -s 65536 -D 5 127.0.0.1 > $out.$1 2>&1 || true
	wait $srv || true
	mb=$(awk '$1 == 65536 { print $4 }' $out.$1 | tail -1)
	echo "$mb"
}
w=$(perf ib_write_bw); r=$(perf ib_read_bw)

xfer() {
	build/xfer-bench --protocol rdma --mode loopback --operation $1 \
		--block_size 65536 --batch_size 128 --duration 5 --json
}
xw=$(xfer write); xr=$(xfer read)
python3 - "$w" "$r" "$xw" "$xr" <<'PY'
import json, sys
pw, pr = float(sys.argv[1]), float(sys.argv[2])
xw, xr = json.loads(sys.argv[3]), json.loads(sys.argv[4])
print("%-6s %14s %14s %7s %16s" % ("op", "perftest MB/s", "xfer MB/s",
      "ratio", "xfer CPU s/GB"))
for op, mb, x in (("write", pw, xw), ("read", pr, xr)):
    xmb = x["throughput_gbps"] * 1000
    xcpu = x["cpu_s_per_gb_initiator"] + x["cpu_s_per_gb_target"]
    print("%-6s %14.1f %14.1f %7.2f %16.2f" % (op, mb, xmb, xmb / mb, xcpu))
print("perftest busy-polls: about one core per process while it runs")
PY
