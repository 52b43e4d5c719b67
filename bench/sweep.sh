#!/usr/bin/env bash
# A sweep over block sizes, as perftest -a does: for each size from 4 KiB
# to 16 MiB, xfer's throughput and its one-request round trip (p50, p99)
# next to the reference tool's on the same path, in one run:
#   --protocol tcp   two xfer-bench processes over loopback TCP (batches
#                    of 16 WRITEs, one thread) vs iperf3 -l SIZE (1 MiB
#                    at most, iperf3's largest); again on iperf3's terms
#                    ("same"): one connection, its batch over one block
#                    of memory a side (--footprint SIZE), as iperf3
#                    sends one buffer over one stream; latency
#                    (one WRITE a batch) vs sockperf ping-pong of SIZE
#                    (sockperf takes messages under 64 KiB: no reference
#                    latency above)
#   --protocol file  xfer-bench --mode loopback --file on tmpfs (WRITEs,
#                    queue depth 32) vs fio --ioengine=io_uring, same
#                    block size, depth and footprint; latency at depth 1
#                    vs fio's completion latency at depth 1
#   --protocol rdma  in an rdmavm guest (--topo lo, Soft-RoCE on rxe0):
#                    xfer-bench --mode loopback --protocol rdma (batches
#                    of 16 WRITEs, one thread) vs ib_write_bw -s SIZE
#                    (64 MiB of iterations, 128 to 5000), and "same",
#                    over one block (perftest posts from one buffer);
#                    latency (one WRITE a batch) vs ib_write_lat -s SIZE
#                    (LAT_ITERS round trips at 4 KiB, as many bytes
#                    above, 50 at least; its one-way figures doubled: a
#                    WRITE's round trip). The guest's CPUs are emulated:
#                    keep the sizes small (4 KiB to 1 MiB by default)
# Writes OUT/sweep-PROTO.csv and OUT/sweep-PROTO.svg (gnuplot): GB/s and
# microseconds against the block size, both tools. Where xfer and "same"
# part, the memory is the difference: 16 blocks of SIZE on each side
# stream through the caches, where the reference reuses one hot buffer.
# Fails only when a tool fails (a perftest run without figures twice in
# the guest leaves its point out).
#   bench/sweep.sh [--protocol tcp|file|rdma] [--out DIR]   (DURATION=2 s
#   a run; SIZES="4096 ... 16777216", rdma "4096 ... 1048576";
#   IPERF_PORT=5201, SOCKPERF_PORT=11111; LAT_ITERS=1000, RDMAVM=path)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-2}
SIZES=${SIZES:-}
LAT_ITERS=${LAT_ITERS:-1000}
IPERF_PORT=${IPERF_PORT:-5201}
SOCKPERF_PORT=${SOCKPERF_PORT:-11111}
BENCH=${BENCH:-build/xfer-bench}
PROTO=tcp
OUT=build/sweep
QD=32
DEV=rxe0
GUEST=0

die() { echo "sweep.sh: $1" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--protocol) PROTO=${2:?--protocol tcp|file}; shift 2 ;;
	--protocol=*) PROTO=${1#*=}; shift ;;
	--out) OUT=${2:?--out DIR}; shift 2 ;;
	--out=*) OUT=${1#*=}; shift ;;
	--in-guest) GUEST=1; shift ;;
	*) die "usage: bench/sweep.sh [--protocol tcp|file|rdma] [--out DIR]" ;;
	esac
done
case $PROTO in
tcp) tools="iperf3 sockperf gnuplot" ;;
file) tools="fio gnuplot" ;;
rdma) tools="ib_write_bw ib_write_lat gnuplot"
      SIZES=${SIZES:-"4096 16384 65536 262144 1048576"} ;;
*) die "--protocol is tcp, file or rdma" ;;
esac
SIZES=${SIZES:-"4096 16384 65536 262144 1048576 4194304 16777216"}
[ -x "$BENCH" ] || make -s
for t in $tools; do
	command -v "$t" >/dev/null || die "$t not found (make setup)"
done
mkdir -p "$OUT"
if [ "$PROTO" = rdma ] && [ "$GUEST" = 0 ]; then
	RDMAVM=${RDMAVM:-../shared/rdmavm/rdmavm}
	[ -x "$RDMAVM" ] || die "rdmavm not found at $RDMAVM (set RDMAVM)"
	n=$(wc -w <<<"$SIZES")
	exec "$RDMAVM" run --topo lo --timeout $((n * (4 * DURATION + 90) + 120)) \
		-- env DURATION="$DURATION" SIZES="$SIZES" LAT_ITERS="$LAT_ITERS" \
		BENCH="$BENCH" bench/sweep.sh --protocol rdma --out "$OUT" --in-guest
fi

pids=()
tmp=$(mktemp -d)
file=$(mktemp /dev/shm/xfer-sweep.XXXXXX)
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp" "$file"' EXIT
. bench/target.sh



# xfer_tcp BS BATCH [FLAG...]: GBPS, P50, P99 of an initiator against a
# fresh target.
xfer_tcp() {
	local bs=$1 batch=$2 size out
	shift 2
	size=$((bs * batch > (8 << 20) ? bs * batch : 8 << 20))
	target_start --duration 0 --buffer_size "$size"
	out=$(timeout $((DURATION + 60)) "$BENCH" --mode initiator \
		--protocol tcp --segment_id "$target_name" --buffer_size "$size" \
		--block_size "$bs" --batch_size "$batch" --threads 1 \
		--duration "$DURATION" --operation write --json "$@") ||
		die "xfer-bench $bs x $batch $* failed"
	target_stop
	GBPS=$(json throughput_gbps <<<"$out")
	P50=$(json lat_p50_us <<<"$out")
	P99=$(json lat_p99_us <<<"$out")
}

# xfer_file BS DEPTH: the same, the local file path on tmpfs.
xfer_file() {
	local bs=$1 depth=$2 out
	out=$(XFER_FILE_QUEUE_DEPTH=$depth timeout $((DURATION + 60)) \
		"$BENCH" --mode loopback --protocol tcp --file "$file" \
		--buffer_size $((bs * depth)) --block_size "$bs" \
		--batch_size "$depth" --threads 1 --duration "$DURATION" \
		--operation write --json) || die "xfer-bench --file $bs failed"
	GBPS=$(json throughput_gbps <<<"$out")
	P50=$(json lat_p50_us <<<"$out")
	P99=$(json lat_p99_us <<<"$out")
}

# xfer_rdma BS BATCH [FLAG...]: the same, both engines in one process
# over rxe0.
xfer_rdma() {
	local bs=$1 batch=$2 size out
	shift 2
	size=$((bs * batch > (8 << 20) ? bs * batch : 8 << 20))
	out=$(timeout $((DURATION + 120)) "$BENCH" --mode loopback \
		--protocol rdma --device_name "$DEV" --buffer_size "$size" \
		--block_size "$bs" --batch_size "$batch" --threads 1 \
		--duration "$DURATION" --operation write --json "$@") ||
		die "xfer-bench rdma $bs x $batch $* failed"
	GBPS=$(json throughput_gbps <<<"$out")
	P50=$(json lat_p50_us <<<"$out")
	P99=$(json lat_p99_us <<<"$out")
}

# perftest TOOL BS ARGS...: the client's output of TOOL -s BS against a
# server of its own on rxe0 (a free port), in $tmp/pt.
perftest() {
	local t=$1 bs=$2 port=$((18515 + RANDOM % 1000)) srv
	shift 2
	local args=(-d "$DEV" -x "$GID" -s "$bs" -F -p "$port" "$@")

	"$t" "${args[@]}" >"$tmp/pt.srv" 2>&1 &
	srv=$!
	pids+=("$srv")
	listening "$port"
	timeout $((DURATION + 120)) "$t" "${args[@]}" 127.0.0.1 >"$tmp/pt" 2>&1 ||
		{ cat "$tmp/pt" "$tmp/pt.srv" >&2; die "$t -s $bs failed"; }
	wait "$srv" || { cat "$tmp/pt.srv" >&2; die "$t -s $bs server failed"; }
}

# lat_iters BS: LAT_ITERS round trips of 4 KiB, fewer as BS grows (as
# many bytes, 50 at least): a MiB each way is tens of ms in the guest.
lat_iters() {
	local n=$((LAT_ITERS * 4096 / $1))
	echo $((n < 50 ? 50 : n > LAT_ITERS ? LAT_ITERS : n))
}

# bw_iters BS: iterations of ib_write_bw, 64 MiB in all (128 to 5000):
# its -D counts nothing in a guest this slow once messages are large.
bw_iters() {
	local n=$(((64 << 20) / $1))
	echo $((n < 128 ? 128 : n > 5000 ? 5000 : n))
}

# warn TOOL BS: its output, and that its point is left out (nan).
warn() {
	cat "$tmp/pt" >&2
	echo "sweep.sh: $1 -s $2 gave no figures twice: nan" >&2
}

# ref_rdma BS: RGBPS from ib_write_bw's BW average (MiB/s), RP50/RP99
# from ib_write_lat's t_typical and 99% percentile, twice (it prints half
# its ping-pong's round trip); each tool run again if it gave none (an
# emulated guest starved of CPU), nan after that.
ref_rdma() {
	local bs=$1
	local try
	# a run that moved nothing (seen now and then) is run again
	for try in 1 2; do
		perftest ib_write_bw "$bs" -n "$(bw_iters "$bs")"
		RGBPS=$(awk -v s="$bs" '$1 == s && NF >= 5 && $4 > 0 { v = $4 }
			END { if (v) printf "%.3f", v * 1.048576 / 1000 }' "$tmp/pt")
		[ -z "$RGBPS" ] || break
	done
	[ -n "$RGBPS" ] || { RGBPS=nan; warn ib_write_bw "$bs"; }
	for try in 1 2; do
		perftest ib_write_lat "$bs" -n "$(lat_iters "$bs")"
		read -r RP50 RP99 <<<"$(awk -v s="$bs" '$1 == s && NF >= 8 &&
			$5 + 0 > 0 && $8 + 0 < 1e12 { v = 2 * $5 " " 2 * $8 }
			END { print v }' "$tmp/pt")"
		[ -z "$RP99" ] || break
	done
	[ -n "$RP99" ] || { RP50=nan RP99=nan; warn ib_write_lat "$bs"; }
}

# ref_tcp BS: RGBPS from iperf3 -l BS (at most its 1 MiB: a stream's
# writes past that change nothing), RP50/RP99 from sockperf (or nan).
ref_tcp() {
	local bs=$1 out l=$(($1 > 1048576 ? 1048576 : $1))
	out=$(timeout $((DURATION + 30)) iperf3 -c 127.0.0.1 -p "$IPERF_PORT" \
		-t "$DURATION" -l "$l" -J) || die "iperf3 -l $l failed"
	RGBPS=$(json end.sum_received.bits_per_second <<<"$out" |
		awk '{ printf "%.3f", $1 / 8e9 }')
	RP50=nan RP99=nan
	[ "$bs" -lt 65536 ] || return 0
	sockperf_run "$bs"
	RP50=$RTT50 RP99=$RTT99
}

# fio_file BS DEPTH: GB/s, p50 and p99 completion latency (us) of fio
# writing the same footprint.
fio_file() {
	local bs=$1 depth=$2 out
	out=$(timeout $((DURATION + 60)) fio --name=sweep --filename="$file" \
		--ioengine=io_uring --rw=write --bs="$bs" --iodepth="$depth" \
		--size=$((bs * depth)) --runtime="$DURATION" --time_based \
		--output-format=json) || die "fio $bs failed"
	read -r FGBPS FP50 FP99 <<<"$(python3 -c '
import json, sys
w = json.load(sys.stdin)["jobs"][0]["write"]
p = w["clat_ns"]["percentile"]
print("%.3f %.1f %.1f" % (w["bw_bytes"] / 1e9, p["50.000000"] / 1e3,
                          p["99.000000"] / 1e3))' <<<"$out")"
}

csv=$OUT/sweep-$PROTO.csv
echo "block_bytes,xfer_gbps,ref_gbps,xfer_p50_us,xfer_p99_us,ref_p50_us,ref_p99_us,same_gbps" >"$csv"
if [ "$PROTO" = tcp ]; then
	iperf3 -s -p "$IPERF_PORT" >/dev/null 2>&1 &
	pids+=("$!")
	listening "$IPERF_PORT"
	ref="iperf3 -l SIZE / sockperf pp -m SIZE"
elif [ "$PROTO" = rdma ]; then
	ulimit -l unlimited || die "ulimit -l unlimited refused"
	[ -d /sys/class/infiniband/$DEV ] || die "no RDMA device $DEV here"
	GID=$(rdma_gid "$DEV")
	ref="ib_write_bw / ib_write_lat -s SIZE, rxe0 in rdmavm"
else
	ref="fio io_uring, depth $QD / depth 1"
fi
for bs in $SIZES; do
	if [ "$PROTO" = tcp ]; then
		xfer_tcp "$bs" 16
		g=$GBPS
		XFER_TCP_CONNS=1 xfer_tcp "$bs" 16 --footprint "$bs"
		same=$GBPS
		xfer_tcp "$bs" 1
		ref_tcp "$bs"
		rg=$RGBPS rp50=$RP50 rp99=$RP99
	elif [ "$PROTO" = rdma ]; then
		xfer_rdma "$bs" 16
		g=$GBPS
		xfer_rdma "$bs" 16 --footprint "$bs"
		same=$GBPS
		xfer_rdma "$bs" 1
		ref_rdma "$bs"
		rg=$RGBPS rp50=$RP50 rp99=$RP99
	else
		xfer_file "$bs" "$QD"
		g=$GBPS same=nan
		fio_file "$bs" "$QD"
		rg=$FGBPS
		fio_file "$bs" 1
		rp50=$FP50 rp99=$FP99
		xfer_file "$bs" 1
	fi
	echo "$bs,$g,$rg,$P50,$P99,$rp50,$rp99,$same" >>"$csv"
	echo "$bs bytes: xfer $g GB/s (same $same, ref $rg), p50 $P50 us" \
		"(ref $rp50)" >&2
done

same_plot=
[ "$PROTO" = file ] ||
	same_plot='"" using 1:8 with linespoints title "xfer, same",'
gnuplot <<EOF
set terminal svg size 900,420 dynamic font "sans,11"
set output "$OUT/sweep-$PROTO.svg"
set datafile separator ","
set datafile missing "nan"
set key autotitle columnhead
set multiplot layout 1,2 title "xfer $PROTO vs $ref, $(nproc) cores, $(date +%Y-%m-%d)"
set logscale x 2
set format x "%.0b%B"
set xlabel "block size (bytes)"
set grid
set ylabel "GB/s"
set key top left
plot "$csv" using 1:2 with linespoints title "xfer", \
     $same_plot "" using 1:3 with linespoints title "reference"
set logscale y 10
set ylabel "round trip of one request (us)"
plot "$csv" using 1:4 with linespoints title "xfer p50", \
     "" using 1:5 with linespoints title "xfer p99", \
     "" using 1:6 with linespoints title "reference p50", \
     "" using 1:7 with linespoints title "reference p99"
unset multiplot
EOF
echo "wrote $csv and $OUT/sweep-$PROTO.svg"
