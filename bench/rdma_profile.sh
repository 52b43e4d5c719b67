#!/usr/bin/env bash
# Where the time goes on xfer's RDMA path: perf record, system wide (the
# guest's kernel, Soft-RoCE included), of xfer-bench --protocol rdma --mode
# loopback in one rdmavm --topo lo guest, for each case, then perf report
# by thread, by object and by symbol. Reports land in build/prof/CASE.txt.
#   bench/rdma_profile.sh [--cases "write64k read4k ..."]
#   DURATION=3 (seconds per case), RDMAVM=path
# Needs perf (Debian: linux-perf); the guest runs the host's.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-3}
CASES="write64k read64k write4k read4k"
BENCH=build/xfer-bench
OUTDIR=build/prof

die() { echo "rdma_profile.sh: $1" >&2; exit "${2:-1}"; }

GUEST=0
while [ $# -gt 0 ]; do
	case $1 in
	--cases) CASES=$2; shift 2 ;;
	--cases=*) CASES=${1#*=}; shift ;;
	--in-guest) GUEST=1; shift ;;
	*) die "unknown argument $1 (--cases LIST)" 2 ;;
	esac
done

if [ "$GUEST" = 0 ]; then
	RDMAVM=${RDMAVM:-../shared/rdmavm/rdmavm}
	[ -x "$RDMAVM" ] || die "rdmavm not found at $RDMAVM (set RDMAVM)" 2
	command -v perf >/dev/null ||
		die "perf not found: apt-get install -y linux-perf" 2
	[ -x "$BENCH" ] || make -s
	mkdir -p "$OUTDIR"
	ncases=$(wc -w <<<"$CASES")
	exec "$RDMAVM" run --topo lo --timeout $((ncases * (DURATION + 90) + 120)) -- \
		env DURATION="$DURATION" bench/rdma_profile.sh --in-guest \
		--cases "$CASES"
fi

# ---- in the guest ----
ulimit -l unlimited || die "ulimit -l unlimited refused"
export HOME=/tmp # perf's build-id cache; the guest's root is read-only
for c in $CASES; do
	case $c in
	write64k) op=write size=65536 ;;
	read64k) op=read size=65536 ;;
	write4k) op=write size=4096 ;;
	read4k) op=read size=4096 ;;
	*) die "unknown case $c" 2 ;;
	esac
	data=$OUTDIR/$c.data
	perf record -q -a -g -F 499 -e cpu-clock -o "$data" -- \
		"$BENCH" --protocol rdma --mode loopback --operation "$op" \
		--block_size "$size" --batch_size 128 --threads 1 \
		--duration "$DURATION" --buffer_size $((64 << 20)) \
		>"$OUTDIR/$c.bench" 2>&1 || die "$c: perf record failed"
	set +o pipefail # head ends the reports early
	{
		echo "== $c: $(grep -m1 'Test completed' "$OUTDIR/$c.bench")"
		echo "== by thread"
		perf report -i "$data" --no-children --sort comm --stdio -g none \
			2>/dev/null | grep -v '^#' | grep -v '^$' | head -20
		echo "== by thread and object"
		perf report -i "$data" --no-children --sort comm,dso --stdio \
			-g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -30
		echo "== by symbol"
		perf report -i "$data" --no-children --sort comm,sym --stdio \
			-g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -60
		for comm in xfer-rxe0 xfer-bench; do
			echo "== thread $comm: time under each function (children)"
			perf report -i "$data" --children --comms "$comm" \
				--sort sym --stdio -g none 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -70
		done
		echo "== call graphs, callers of the top symbols"
		perf report -i "$data" --no-children --sort sym --stdio \
			-g caller,0.5,callee --percent-limit 3 2>/dev/null |
			grep -v '^$' | head -300
	} >"$OUTDIR/$c.txt"
	set -o pipefail
	echo "$c: $OUTDIR/$c.txt"
done
