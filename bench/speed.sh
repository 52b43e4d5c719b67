#!/usr/bin/env bash
# xfer over loopback TCP against iperf3 on the same path, then the CPU an
# idle target burns. Fails only when a tool fails, not on a low ratio.
#   DURATION=10 bench/speed.sh      (seconds per run; IPERF_PORT=5201)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
IPERF_PORT=${IPERF_PORT:-5201}
BENCH=build/xfer-bench

[ -x "$BENCH" ] || make -s
command -v iperf3 >/dev/null || { echo "speed.sh: iperf3 not found" >&2; exit 1; }

# Background processes still running when the script stops early.
pids=()
log=$(mktemp)
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -f "$log"' EXIT

# json FIELD...: print the fields of the JSON object on stdin, one a line.
json() {
	python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = d
    for p in k.split("."):
        v = v[p]
    print("nan" if v is None else v)' "$@"
}

# One single-stream client against a server started here and stopped
# after; the client starts once the server listens.
iperf3 -s -p "$IPERF_PORT" >/dev/null 2>&1 &
iperf_pid=$!
pids+=("$iperf_pid")
for _ in $(seq 100); do
	ss -Hltn "sport = :$IPERF_PORT" | grep -q . && break
	sleep 0.05
done
out=$(timeout $((DURATION + 30)) iperf3 -c 127.0.0.1 -p "$IPERF_PORT" \
	-t "$DURATION" -J) || { echo "speed.sh: iperf3 client failed" >&2; exit 1; }
kill "$iperf_pid" 2>/dev/null || true
wait "$iperf_pid" 2>/dev/null || true
iperf_gbps=$(json end.sum_received.bits_per_second <<<"$out" |
	awk '{ printf "%.2f", $1 / 8e9 }')

declare -A gbps cpu_i cpu_t
for op in read write; do
	out=$("$BENCH" --mode loopback --protocol tcp --block_size 65536 \
		--batch_size 128 --threads 1 --duration "$DURATION" \
		--operation "$op" --json)
	vals=$(json throughput_gbps cpu_s_per_gb_initiator cpu_s_per_gb_target <<<"$out")
	{ read -r g; read -r ci; read -r ct; } <<<"$vals"
	gbps[$op]=$g cpu_i[$op]=$ci cpu_t[$op]=$ct
done

ratio() { awk -v x="$1" -v y="$iperf_gbps" 'BEGIN { printf "%.2f", (y > 0 ? x / y : 0) }'; }
printf '%-14s %8s %7s %18s %15s\n' run GB/s ratio 'initiator s/GB' 'target s/GB'
printf '%-14s %8s\n' iperf3 "$iperf_gbps"
for op in read write; do
	printf '%-14s %8.2f %7s %18.3f %15.3f\n' "xfer $op" "${gbps[$op]}" \
		"$(ratio "${gbps[$op]}")" "${cpu_i[$op]}" "${cpu_t[$op]}"
done

# Idle target: CPU ticks (utime+stime) from the moment it serves until just
# before its --duration ends, so setup and teardown stay out of the figure.
"$BENCH" --mode target --protocol tcp --duration "$DURATION" --bind_addr 127.0.0.1 >"$log" &
target_pid=$!
pids+=("$target_pid")
until grep -q 'segment' "$log"; do
	kill -0 "$target_pid" 2>/dev/null || { echo "speed.sh: target died" >&2; exit 1; }
	sleep 0.05
done
ticks() { sed 's/.*) //' "/proc/$target_pid/stat" | awk '{ print $12 + $13 }'; }
t0=$(date +%s.%N) c0=$(ticks)
sleep "$(awk -v d="$DURATION" 'BEGIN { s = d - 1.5; printf "%.2f", (s > 0.5 ? s : 0.5) }')"
t1=$(date +%s.%N) c1=$(ticks)
wait "$target_pid"
awk -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v t0="$t0" -v t1="$t1" \
	'BEGIN { printf "idle target: %.2f%% of one core over %.1f s\n", 100 * c / hz / (t1 - t0), t1 - t0 }'
