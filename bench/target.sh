# Sourced by bench/speed.sh and bench/file_speed.sh: an xfer-bench target
# on loopback TCP in the background. Uses the caller's $BENCH, $tmp, its
# pids array (what its exit trap stops) and die().

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
