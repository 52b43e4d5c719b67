#!/usr/bin/env bash
# xfer over RDMA against perftest, in one rdmavm guest over rxe0 (Soft-RoCE):
# ib_write_bw and ib_read_bw at 64 KiB (server and client in the guest), then
# xfer-bench --protocol rdma --mode loopback write and read at 64 KiB, batch
# 128. Prints throughput, the ratio xfer/perftest (target >= 0.9) and CPU
# seconds per GB of both sides of each. Fails (exit 2) when rdmavm or
# perftest is missing, 1 when a run fails; not on a low ratio.
#   DURATION=5 bench/rdma_speed.sh    (seconds per run; RDMAVM=path)
# The guest's CPUs are emulated: absolute figures are tens of MB/s.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
BENCH=build/xfer-bench
DEV=rxe0

die() { echo "rdma_speed.sh: $1" >&2; exit "${2:-1}"; }

if [ "${1:-}" != --in-guest ]; then
	RDMAVM=${RDMAVM:-../shared/rdmavm/rdmavm}
	[ -x "$RDMAVM" ] || die "rdmavm not found at $RDMAVM (set RDMAVM)" 2
	for t in ib_write_bw ib_read_bw; do
		command -v "$t" >/dev/null ||
			die "$t not found: install perftest (apt-get install -y perftest)" 2
	done
	[ -x /usr/bin/time ] || die "/usr/bin/time not found (apt-get install -y time)" 2
	[ -x "$BENCH" ] || make -s
	exec "$RDMAVM" run --topo lo --timeout $((8 * DURATION + 120)) -- \
		env DURATION="$DURATION" bench/rdma_speed.sh --in-guest
fi

# ---- in the guest ----
ulimit -l unlimited || die "ulimit -l unlimited refused"
[ -d /sys/class/infiniband/$DEV ] || die "no RDMA device $DEV in this guest"
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

# The RoCE v2 GID with an IPv4 address (::ffff:a.b.c.d), as xfer picks it.
gid_index() {
	local p=/sys/class/infiniband/$DEV/ports/1 f i
	for f in "$p"/gid_attrs/types/*; do
		i=${f##*/}
		[ "$(cat "$f" 2>/dev/null)" = "RoCE v2" ] || continue
		case $(cat "$p/gids/$i") in
		0000:0000:0000:0000:0000:ffff:*) echo "$i"; return ;;
		esac
	done
	echo 1
}
GID=$(gid_index)

# perf TOOL: one server in the background, one client against it, each under
# /usr/bin/time. Prints "MiB/s cpu_s/GB": BW average, and the CPU of both
# processes over their own lifetimes turned into seconds per GB moved at
# that rate (perftest busy-polls, so each burns about a core throughout).
perf() {
	local t=$1 port=$((18515 + RANDOM % 1000)) srv mib
	local args=(-d "$DEV" -x "$GID" -s 65536 -D "$DURATION" -F -p "$port")

	/usr/bin/time -f "%U %S %e" -o "$tmp/$t.srv.time" \
		"$t" "${args[@]}" >"$tmp/$t.srv" 2>&1 &
	srv=$!
	pids+=("$srv")
	for _ in $(seq 100); do
		ss -Hltn "sport = :$port" | grep -q . && break
		sleep 0.1
	done
	/usr/bin/time -f "%U %S %e" -o "$tmp/$t.cli.time" \
		timeout $((DURATION + 60)) "$t" "${args[@]}" 127.0.0.1 \
		>"$tmp/$t.cli" 2>&1 ||
		{ cat "$tmp/$t.cli" "$tmp/$t.srv" >&2; die "$t client failed"; }
	wait "$srv" || { cat "$tmp/$t.srv" >&2; die "$t server failed"; }
	# #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]
	mib=$(awk '$1 == 65536 && NF >= 5 { v = $4 } END { print v }' "$tmp/$t.cli")
	[ -n "$mib" ] || { cat "$tmp/$t.cli" >&2; die "$t: no BW average line"; }
	cat "$tmp/$t.srv.time" "$tmp/$t.cli.time" | awk -v mib="$mib" '
		{ core += ($3 > 0 ? ($1 + $2) / $3 : 0) }
		END { gbs = mib * 1048576 / 1e9
		      printf "%s %.3f %.2f\n", mib, (gbs > 0 ? core / gbs : 0), core }'
}

# xfer OP: prints "GB/s initiator_s/GB target_s/GB" of one loopback run.
xfer() {
	local out
	out=$(timeout $((DURATION + 60)) "$BENCH" --protocol rdma --mode loopback \
		--operation "$1" --block_size 65536 --batch_size 128 --threads 1 \
		--duration "$DURATION" --buffer_size $((64 << 20)) --json) ||
		die "xfer-bench $1 failed"
	python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print(d["throughput_gbps"], d["cpu_s_per_gb_initiator"], d["cpu_s_per_gb_target"])
' "$out"
}

echo "rxe0, GID index $GID, 64 KiB messages, $DURATION s per run"
read -r pw_mib pw_cpu pw_core <<<"$(perf ib_write_bw)"
read -r pr_mib pr_cpu pr_core <<<"$(perf ib_read_bw)"
read -r xw_gbs xw_ci xw_ct <<<"$(xfer write)"
read -r xr_gbs xr_ci xr_ct <<<"$(xfer read)"

# MB/s = 1e6 bytes/s throughout (perftest reports MiB/s).
row() { # op perftest_MiB/s xfer_GB/s perftest_s/GB xfer_initiator xfer_target
	awk -v op="$1" -v p="$2" -v x="$3" -v pc="$4" -v xi="$5" -v xt="$6" 'BEGIN {
		pb = p * 1048576; xb = x * 1e9; r = pb > 0 ? xb / pb : 0
		printf "%-6s %13.1f %10.1f %6.2f %-3s %14.3f %10.3f %10.3f %10.3f\n",
		       op, pb / 1e6, xb / 1e6, r, (r >= 0.9 ? "ok" : "LOW"),
		       pc, xi + xt, xi, xt
	}'
}
printf '%-6s %13s %10s %6s %-3s %14s %10s %10s %10s\n' op 'perftest MB/s' \
	'xfer MB/s' ratio '' 'perftest s/GB' 'xfer s/GB' initiator target
row write "$pw_mib" "$xw_gbs" "$pw_cpu" "$xw_ci" "$xw_ct"
row read "$pr_mib" "$xr_gbs" "$pr_cpu" "$xr_ci" "$xr_ct"
echo "ratio: xfer / perftest, target >= 0.9"
echo "perftest s/GB: server + client processes, user + sys ($pw_core cores in write, $pr_core in read;"
echo "  the client busy-polls, the server of a one-sided test mostly waits)"
echo "xfer s/GB: the threads of both engines (initiator + target, one process)"
