# Sourced by bench/speed.sh, bench/file_speed.sh and bench/sweep.sh: an
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
