#!/usr/bin/env bash
# xfer over loopback TCP, target and initiator in two processes, against a
# reference on the same path, each as a ratio within one round:
#   4 KiB requests, batch 128, one thread   vs iperf3 -l 4096 (one stream)
#   64 KiB requests, batch 128, one thread  vs iperf3 -P N, N = xfer's
#                                              connections per peer
#   one 4 KiB request a batch, p50 and p99  vs sockperf ping-pong, TCP,
#   round trip: waited for by the thread       4 KiB each way (--full-rtt)
#   that submits it (xfer_batch_wait), and
#   with --plugin (the engine on the bench's
#   event loop, the callback on that thread)
# read and write each; then the CPU an idle target burns. Beside each
# throughput, the CPU seconds per GB of the initiator and the target, and
# of iperf3's client and server (its -J cpu_utilization_percent, host and
# remote), and the ratio of the sums (xfer over iperf3). With --rounds N
# every figure is the median of N rounds, a ratio the median of the
# rounds' ratios. Fails only when a tool fails, not on a low ratio.
#   DURATION=10 bench/speed.sh [--rounds N]
#   (seconds per run; IPERF_PORT=5201, SOCKPERF_PORT=11111,
#   XFER_TCP_CONNS=2, BENCH=build/xfer-bench)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
IPERF_PORT=${IPERF_PORT:-5201}
SOCKPERF_PORT=${SOCKPERF_PORT:-11111}
CONNS=${XFER_TCP_CONNS:-2}
BENCH=${BENCH:-build/xfer-bench}

die() { echo "speed.sh: $1" >&2; exit 1; }

. bench/target.sh
rounds_arg "$@"

[ -x "$BENCH" ] || make -s
for t in iperf3 sockperf; do
	command -v $t >/dev/null || die "$t not found (make setup)"
done

# Background processes still running when the script stops early.
pids=()
tmp=$(mktemp -d)
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

# Each run sets globals rather than print, so that it runs in this shell:
# a failure stops the script, and the trap stops what it started.

# iperf_run ARGS...: REF, the GB/s received by one iperf3 client run;
# REF_CI and REF_CT, the CPU s/GB of its client and its server.
iperf_run() {
	local out
	out=$(timeout $((DURATION + 30)) iperf3 -c 127.0.0.1 -p "$IPERF_PORT" \
		-t "$DURATION" -J "$@") || die "iperf3 $* failed"
	read -r REF REF_CI REF_CT <<<"$(json end.sum_received.bytes \
		end.sum_received.seconds end.cpu_utilization_percent.host_total \
		end.cpu_utilization_percent.remote_total <<<"$out" |
		tr '\n' ' ' | awk '{ gb = $1 / 1e9
			printf "%.3f %.4f %.4f", gb / $2, $3 / 100 * $2 / gb,
				$4 / 100 * $2 / gb }')"
}

# xfer_run OP BLOCK BATCH [FLAG...]: one target process serving 8 MiB,
# one initiator moving batches against it. Sets GBPS, P50, P99 (us),
# CPU_I and CPU_T (s/GB).
xfer_run() {
	local op=$1 bs=$2 batch=$3 out gb
	local size=$((8 << 20))
	shift 3

	target_start --duration 0 --buffer_size "$size" --json
	out=$(timeout $((DURATION + 60)) "$BENCH" --mode initiator \
		--protocol tcp --segment_id "$target_name" --buffer_size "$size" \
		--block_size "$bs" --batch_size "$batch" --threads 1 \
		--duration "$DURATION" --operation "$op" --json "$@") ||
		die "xfer-bench $op $bs x $batch $* failed"
	target_stop
	read -r GBPS P50 P99 CPU_I gb <<<"$(json throughput_gbps lat_p50_us \
		lat_p99_us cpu_s_per_gb_initiator bytes <<<"$out" | tr '\n' ' ')"
	CPU_T=$(grep '^{' "$tmp/target" | json cpu_s_target |
		awk -v b="$gb" '{ print (b > 0 ? $1 / (b / 1e9) : "nan") }')
}

for round in $(seq "$ROUNDS"); do
	iperf3 -s -p "$IPERF_PORT" >/dev/null 2>&1 &
	iperf_pid=$!
	pids+=("$iperf_pid")
	listening "$IPERF_PORT"
	iperf_run -l 4096
	ref4k=$REF ref4k_c=$(awk -v a="$REF_CI" -v b="$REF_CT" 'BEGIN { print a + b }')
	add ref4k.ci "$REF_CI"
	add ref4k.ct "$REF_CT"
	iperf_run -P "$CONNS"
	ref64k=$REF ref64k_c=$(awk -v a="$REF_CI" -v b="$REF_CT" 'BEGIN { print a + b }')
	add ref64k.ci "$REF_CI"
	add ref64k.ct "$REF_CT"
	kill "$iperf_pid" 2>/dev/null || true
	wait "$iperf_pid" 2>/dev/null || true
	sockperf_run 4096
	add ref4k "$ref4k"
	add ref64k "$ref64k"
	add rtt50 "$RTT50"
	add rtt99 "$RTT99"

	for op in write read; do
		for size in 4k 64k; do
			bs=$([ $size = 4k ] && echo 4096 || echo 65536)
			ref=$([ $size = 4k ] && echo "$ref4k" || echo "$ref64k")
			refc=$([ $size = 4k ] && echo "$ref4k_c" || echo "$ref64k_c")
			xfer_run $op $bs 128
			add "$op$size" "$GBPS"
			add "$op$size.ratio" "$(ratio "$GBPS" "$ref")"
			add "$op$size.ci" "$CPU_I"
			add "$op$size.ct" "$CPU_T"
			add "$op$size.cratio" "$(ratio "$(awk -v a="$CPU_I" \
				-v b="$CPU_T" 'BEGIN { print a + b }')" "$refc")"
		done
		for mode in wait plugin; do
			if [ $mode = plugin ]; then
				xfer_run $op 4096 1 --plugin
			else
				xfer_run $op 4096 1
			fi
			add "$op.$mode.p50" "$P50"
			add "$op.$mode.p99" "$P99"
			add "$op.$mode.p50.ratio" "$(ratio "$P50" "$RTT50")"
			add "$op.$mode.p99.ratio" "$(ratio "$P99" "$RTT99")"
		done
	done
	echo "round $round of $ROUNDS done" >&2
done

echo "TCP over loopback, two processes, median of $ROUNDS round(s) of ${DURATION} s runs"
printf '%-28s %9s %9s %-22s %6s %10s %10s %10s %10s %9s\n' figure xfer \
	reference 'reference is' ratio 'init s/GB' 'tgt s/GB' 'ref cli' \
	'ref srv' 'cpu ratio'
for op in write read; do
	for size in 4k 64k; do
		if [ $size = 4k ]; then
			what="iperf3 -l 4096"; ref=ref4k; label="4KiB x128"
		else
			what="iperf3 -P $CONNS"; ref=ref64k; label="64KiB x128"
		fi
		printf '%-28s %9.2f %9.2f %-22s %6.2f %10.3f %10.3f %10.3f %10.3f %9.2f\n' \
			"$op $label GB/s" "$(median "$op$size")" "$(median $ref)" \
			"$what" "$(median "$op$size.ratio")" \
			"$(median "$op$size.ci")" "$(median "$op$size.ct")" \
			"$(median $ref.ci)" "$(median $ref.ct)" \
			"$(median "$op$size.cratio")"
	done
	for mode in wait plugin; do
		for q in p50 p99; do
			printf '%-28s %9.1f %9.1f %-22s %6.2f\n' \
				"$op 4KiB x1 $mode $q us" \
				"$(median "$op.$mode.$q")" "$(median "rtt${q#p}")" \
				"sockperf pp 4KiB" "$(median "$op.$mode.$q.ratio")"
		done
	done
done

# Idle target: CPU ticks (utime+stime) from the moment it serves until just
# before its --duration ends, so setup and teardown stay out of the figure.
target_start --duration "$DURATION"
ticks() { sed 's/.*) //' "/proc/$target_pid/stat" | awk '{ print $12 + $13 }'; }
t0=$(date +%s.%N) c0=$(ticks)
sleep "$(awk -v d="$DURATION" 'BEGIN { s = d - 1.5; printf "%.2f", (s > 0.5 ? s : 0.5) }')"
t1=$(date +%s.%N) c1=$(ticks)
wait "$target_pid"
awk -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v t0="$t0" -v t1="$t1" \
	'BEGIN { printf "idle target: %.2f%% of one core over %.1f s\n", 100 * c / hz / (t1 - t0), t1 - t0 }'
