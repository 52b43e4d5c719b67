#!/bin/sh
# The command lines of Mooncake's transfer_engine_bench documentation
# (its "Transfer Engine Bench" section), run with xfer-bench with only
# their addresses and device names made local: an etcd on 127.0.0.1, the
# engines on 127.0.0.1 ports, the RDMA device of this host. On a host
# without RDMA, --device_name=... becomes --protocol=tcp, as that section
# says for networks that only have TCP. Each target serves until SIGINT;
# each initiator runs its default 10 s and must report batches.
#   test/check_bench_seeds.sh build/xfer-bench
set -eu
bench=${1:-build/xfer-bench}
dir=$(mktemp -d)
etcd_pid= target_pid=
cleanup() {
	[ -z "$target_pid" ] || kill "$target_pid" 2>/dev/null || true
	[ -z "$etcd_pid" ] || kill "$etcd_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "check_bench_seeds: $*" >&2; exit 1; }

ports=$(python3 -c '
import socket
s = [socket.socket() for _ in range(5)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')
set -- $ports
etcd_port=$1 peer_port=$2 target_port=$3 initiator_port=$4 target2_port=$5

# A device that is not there: what was looked for, and the way out, from
# the engine (its log) and from the bench.
if out=$("$bench" --mode=loopback --device_name=nosuchdev0 2>&1); then
	fail "a bench on a missing RDMA device ran"
fi
echo "$out" | grep -q 'engine: No such device: rdma: .*looked in /sys/class/infiniband.*; protocol "tcp" (XFER_PROTOCOL=tcp) needs none' ||
	fail "the engine does not say which device is missing: $out"
echo "$out" | grep -q 'no RDMA device could be opened among --device_name=nosuchdev0 (looked in /sys/class/infiniband); pass --protocol=tcp' ||
	fail "the bench does not say what to pass: $out"

# This host's RDMA device, or TCP (the seeds' erdma_0 / erdma_1).
dev=$(ls /sys/class/infiniband 2>/dev/null | head -n 1 || true)
if [ -n "$dev" ]; then
	target_dev="--device_name=$dev" initiator_dev="--device_name=$dev"
else
	target_dev="--protocol=tcp" initiator_dev="--protocol=tcp"
fi
export MC_GID_INDEX=${GID_INDEX:-0}   # the seeds' "export MC_GID_INDEX=n"

etcd --name seeds --data-dir "$dir/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" \
	--advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$peer_port" \
	--initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
	--initial-cluster "seeds=http://127.0.0.1:$peer_port" \
	>"$dir/etcd.log" 2>&1 &
etcd_pid=$!
i=0
until python3 -c 'import sys, urllib.request
sys.exit(b"true" not in urllib.request.urlopen(sys.argv[1], timeout=1).read())' \
	"http://127.0.0.1:$etcd_port/health" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 300 ] || fail "etcd did not start: $(tail -n 5 "$dir/etcd.log")"
	sleep 0.1
done

# Start a target with the arguments given; wait for its segment line.
target() {
	"$bench" "$@" >"$dir/target.out" 2>"$dir/target.err" &
	target_pid=$!
	i=0
	until grep -q "segment" "$dir/target.out" 2>/dev/null; do
		kill -0 "$target_pid" 2>/dev/null ||
			fail "target $*: $(cat "$dir/target.err")"
		i=$((i + 1))
		[ $i -lt 300 ] || fail "target $* did not come up"
		sleep 0.1
	done
}

# SIGINT ends a target, which exits 0.
target_stop() {
	kill -INT "$target_pid"
	wait "$target_pid" || fail "target exited $?: $(cat "$dir/target.err")"
	target_pid=
}

# Run an initiator with the arguments given; it must report batches.
initiator() {
	out=$("$bench" "$@" 2>"$dir/initiator.err") ||
		fail "initiator $*: $(cat "$dir/initiator.err")"
	echo "$out" | grep -Eq \
		'^Test completed: duration [0-9.]+, batch count [1-9][0-9]*, throughput [0-9.]+ GB/s$' ||
		fail "initiator $*: no result line in: $out"
	echo "seeds: $(echo "$out" | head -n 1)"
}

# 2. Start the target node.
target --mode=target \
	--metadata_server=etcd://127.0.0.1:$etcd_port \
	--local_server_name=127.0.0.1:$target_port \
	$target_dev
# 3. Start the initiator node.
initiator --metadata_server=127.0.0.1:$etcd_port \
	--segment_id=127.0.0.1:$target_port \
	--local_server_name=127.0.0.1:$initiator_port \
	$initiator_dev
target_stop

# The target with --auto_discovery instead of --device_name.
target --mode=target \
	--metadata_server=127.0.0.1:$etcd_port \
	--local_server_name=127.0.0.1:$target2_port \
	--auto_discovery
initiator --metadata_server=127.0.0.1:$etcd_port \
	--segment_id=127.0.0.1:$target2_port \
	--local_server_name=127.0.0.1:$initiator_port \
	$initiator_dev
target_stop

# gflags syntax on the way: an unknown flag fails, naming it.
if "$bench" --mode=target --no_such_flag=1 2>"$dir/err"; then
	fail "an unknown flag was accepted"
fi
grep -q "no_such_flag" "$dir/err" || fail "unknown flag not named: $(cat "$dir/err")"
"$bench" --help >/dev/null || fail "--help failed"
echo "seeds: the documented command lines ran (${dev:-tcp})"
