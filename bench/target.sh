# Sourced by bench/speed.sh, file_speed.sh, sweep.sh and rdma_speed.sh: an
# xfer-bench target on loopback TCP in the background, and the helpers the
# scripts share. Uses the caller's $BENCH, $tmp, its pids array (what its
# exit trap stops) and die().

# json FIELD...: print the fields of the JSON object on stdin, one a line
# (a.b.0: nested, list items by index; null as nan).
json() {
	python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = d
    for p in k.split("."):
        v = v[int(p)] if isinstance(v, list) else v[p]
    print("nan" if v is None else v)' "$@"
}

# rounds_arg ARGS...: ROUNDS from the script's only option, --rounds N
# (1 without it).
rounds_arg() {
	ROUNDS=1
	while [ $# -gt 0 ]; do
		case $1 in
		--rounds) ROUNDS=${2:?--rounds N}; shift 2 ;;
		--rounds=*) ROUNDS=${1#*=}; shift ;;
		*) die "usage: bench/${0##*/} [--rounds N]" ;;
		esac
	done
	[ "$ROUNDS" -ge 1 ] 2>/dev/null ||
		die "--rounds wants a positive number"
}

# Per round: add NAME VALUE gives val[NAME] one value more; median NAME
# prints the median of them; ratio X Y prints X / Y (0 if Y is not > 0).
declare -A val
add() { val[$1]="${val[$1]:-} $2"; }
median() {
	python3 -c 'import statistics, sys
v = [float(x) for x in sys.argv[1:]]
print("%.6g" % statistics.median(v) if v else "nan")' ${val[$1]:-}
}
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { printf "%.4f", (y > 0 ? x / y : 0) }'; }

# listening PORT: wait until something listens on PORT.
listening() {
	for _ in $(seq 200); do
		ss -Hltn "sport = :$1" | grep -q . && return
		sleep 0.05
	done
	die "nothing listens on port $1"
}

# target_start ARGS...: "$BENCH --mode target --protocol tcp --bind_addr
# 127.0.0.1 ARGS", its output in $tmp/target; returns once it serves.
# Sets target_pid and target_name.
target_start() {
	: >"$tmp/target" # not the line of the one before
	"$BENCH" --mode target --protocol tcp --bind_addr 127.0.0.1 \
		"$@" >"$tmp/target" &
	target_pid=$!
	pids+=("$target_pid")
	until grep -q 'segment' "$tmp/target"; do
		kill -0 "$target_pid" 2>/dev/null || die "target $* died"
		sleep 0.05
	done
	target_name=$(awk '/segment/ { print $NF; exit }' "$tmp/target")
}

# target_stop: SIGTERM, and it must end well.
target_stop() {
	kill -TERM "$target_pid"
	wait "$target_pid" || die "target failed"
}

# sockperf_run SIZE: RTT50, RTT99, the round trip (us) of a sockperf
# ping-pong of SIZE-byte messages over loopback TCP ($SOCKPERF_PORT).
sockperf_run() {
	local out spid
	sockperf sr --tcp -i 127.0.0.1 -p "$SOCKPERF_PORT" >/dev/null 2>&1 &
	spid=$!
	pids+=("$spid")
	listening "$SOCKPERF_PORT"
	out=$(timeout $((DURATION + 30)) sockperf pp --tcp -i 127.0.0.1 \
		-p "$SOCKPERF_PORT" -m "$1" -t "$DURATION" --full-rtt 2>&1) ||
		die "sockperf ping-pong -m $1 failed"
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	read -r RTT50 RTT99 <<<"$(awk '
		/percentile 50.000 =/ { p50 = $NF }
		/percentile 99.000 =/ { p99 = $NF }
		END { print p50, p99 }' <<<"$out")"
	[ -n "$RTT99" ] || die "sockperf printed no percentiles"
}

# rdma_gid DEV: the index of DEV's RoCE v2 GID with an IPv4 address
# (::ffff:a.b.c.d), as xfer picks it; 1 if none.
rdma_gid() {
	local p=/sys/class/infiniband/$1/ports/1 f i
	for f in "$p"/gid_attrs/types/*; do
		i=${f##*/}
		[ "$(cat "$f" 2>/dev/null)" = "RoCE v2" ] || continue
		case $(cat "$p/gids/$i") in
		0000:0000:0000:0000:0000:ffff:*) echo "$i"; return ;;
		esac
	done
	echo 1
}
