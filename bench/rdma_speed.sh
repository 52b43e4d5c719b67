#!/usr/bin/env bash
# xfer over RDMA against perftest, in one rdmavm guest over rxe0 (Soft-RoCE).
# Each round runs, case by case, perftest then xfer-bench (--protocol rdma
# --mode loopback, batch 128, one thread):
#   write 64K  ib_write_bw -s 65536   bandwidth, target >= 0.95
#   read 64K   ib_read_bw -s 65536    bandwidth, target >= 0.95
#   write 4K   ib_write_bw -s 4096    message rate, target >= 0.8
#   read 4K    ib_read_bw -s 4096     message rate, target >= 0.8
# and prints, per case, the median over the rounds of perftest's figure,
# xfer's, the ratio of the two in one round, and the CPU seconds per GB of
# every thread of each side (perftest: server + client processes; xfer:
# every thread both engines started, and the submitting thread).
# Fails (exit 2) when rdmavm or perftest is missing, 1 when a run fails;
# not on a low ratio.
#   bench/rdma_speed.sh [--rounds N] [--cases "write64k read4k ..."]
#   DURATION=3 (seconds per run), RDMAVM=path; XFER_* and MC_* variables
#   reach the guest (MC_MAX_SGE=1: one request per work request)
# The guest's CPUs are emulated: absolute figures are tens of MB/s.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-3}
ROUNDS=1
CASES="write64k read64k write4k read4k"
BENCH=build/xfer-bench
DEV=rxe0

die() { echo "rdma_speed.sh: $1" >&2; exit "${2:-1}"; }

GUEST=0
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift 2 ;;
	--rounds=*) ROUNDS=${1#*=}; shift ;;
	--cases) CASES=$2; shift 2 ;;
	--cases=*) CASES=${1#*=}; shift ;;
	--in-guest) GUEST=1; shift ;;
	*) die "unknown argument $1 (--rounds N, --cases LIST)" 2 ;;
	esac
done
case $ROUNDS in ''|*[!0-9]*|0) die "--rounds takes a positive count" 2 ;; esac

if [ "$GUEST" = 0 ]; then
	RDMAVM=${RDMAVM:-../shared/rdmavm/rdmavm}
	[ -x "$RDMAVM" ] || die "rdmavm not found at $RDMAVM (set RDMAVM)" 2
	for t in ib_write_bw ib_read_bw; do
		command -v "$t" >/dev/null ||
			die "$t not found: install perftest (apt-get install -y perftest)" 2
	done
	[ -x /usr/bin/time ] || die "/usr/bin/time not found (apt-get install -y time)" 2
	[ -x "$BENCH" ] || make -s
	ncases=$(wc -w <<<"$CASES")
	# the guest boots afresh: xfer's and Mooncake's variables go along
	mapfile -t knobs < <(env | grep -E '^(XFER|MC)_[A-Z0-9_]*=' || true)
	exec "$RDMAVM" run --topo lo \
		--timeout $((ROUNDS * ncases * (2 * DURATION + 30) + 120)) -- \
		env DURATION="$DURATION" "${knobs[@]}" bench/rdma_speed.sh \
		--in-guest --rounds "$ROUNDS" --cases "$CASES"
fi

# ---- in the guest ----
ulimit -l unlimited || die "ulimit -l unlimited refused"
[ -d /sys/class/infiniband/$DEV ] || die "no RDMA device $DEV in this guest"
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

. bench/target.sh # rdma_gid
GID=$(rdma_gid "$DEV")

# perf TOOL SIZE: one server in the background, one client against it, each
# under /usr/bin/time. Prints "MB/s Mpps cpu_s/GB": BW average (perftest's
# MiB/s turned into 1e6 bytes/s), message rate, and the CPU of both
# processes over their own lifetimes turned into seconds per GB moved at
# that rate (perftest busy-polls, so the client burns a core throughout).
perf() {
	local t=$1 size=$2 port=$((18515 + RANDOM % 1000)) srv line
	local args=(-d "$DEV" -x "$GID" -s "$size" -D "$DURATION" -F -p "$port")

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
	line=$(awk -v s="$size" '$1 == s && NF >= 5 && $4 > 0 { v = $4 " " $5 }
		END { print v }' "$tmp/$t.cli")
	if [ -z "$line" ]; then
		cat "$tmp/$t.cli" >&2
		return 1
	fi
	cat "$tmp/$t.srv.time" "$tmp/$t.cli.time" | awk -v line="$line" '
		{ core += ($3 > 0 ? ($1 + $2) / $3 : 0) }
		END { split(line, v, " "); mbs = v[1] * 1.048576
		      printf "%.1f %.4f %.3f\n", mbs, v[2],
		             (mbs > 0 ? core / (mbs / 1000) : 0) }'
}

# xfer OP SIZE: prints "MB/s Mpps cpu_s/GB initiator_s/GB target_s/GB" of
# one loopback run.
xfer() {
	local out
	out=$(timeout $((DURATION + 60)) "$BENCH" --protocol rdma --mode loopback \
		--operation "$1" --block_size "$2" --batch_size 128 --threads 1 \
		--duration "$DURATION" --buffer_size $((64 << 20)) --json) ||
		die "xfer-bench $1 $2 failed"
	python3 -c '
import json, sys
d = json.loads(sys.argv[1]); size = int(sys.argv[2])
ci, ct = d["cpu_s_per_gb_initiator"], d["cpu_s_per_gb_target"]
mbs = d["throughput_gbps"] * 1000
print("%.1f %.4f %.3f %.3f %.3f" % (mbs, mbs * 1e6 / size / 1e6, ci + ct, ci, ct))
' "$out" "$2"
}

# One line per case and round in $tmp/results:
# case perf_MB/s perf_Mpps perf_s/GB xfer_MB/s xfer_Mpps xfer_s/GB init tgt
echo "rxe0, GID index $GID, $DURATION s per run, $ROUNDS round(s)"
for round in $(seq "$ROUNDS"); do
	for c in $CASES; do
		case $c in
		write64k) op=write size=65536 ;;
		read64k) op=read size=65536 ;;
		write4k) op=write size=4096 ;;
		read4k) op=read size=4096 ;;
		*) die "unknown case $c" 2 ;;
		esac
		# a run that moved nothing (seen now and then) is run again
		p=$(perf "ib_${op}_bw" "$size") || p=$(perf "ib_${op}_bw" "$size") ||
			die "ib_${op}_bw -s $size: no BW average line"
		x=$(xfer "$op" "$size")
		echo "$c $p $x" >>"$tmp/results"
		echo "round $round: $c perftest $p | xfer $x"
	done
done

# Medians per case; the ratio is taken in each round, then its median.
# 64 KiB cases compare bandwidth, 4 KiB ones message rate (the same ratio
# at one size).
echo
printf '%-9s %-5s %10s %10s %6s %6s %-3s %10s %10s %9s %9s\n' case what \
	perftest xfer ratio target '' 'pt s/GB' 'xfer s/GB' initiator target
for c in $CASES; do
	awk -v c="$c" '
	function median(a, n,   i, j, t) {
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	BEGIN { small = c ~ /[a-z]4k$/ }
	$1 == c {
		n++
		pv[n] = small ? $3 : $2; xv[n] = small ? $6 : $5
		r[n] = pv[n] > 0 ? xv[n] / pv[n] : 0
		pc[n] = $4; xc[n] = $7; xi[n] = $8; xt[n] = $9
	}
	END {
		if (!n) exit
		want = small ? 0.8 : 0.95
		m = median(r, n)
		printf "%-9s %-5s %10.*f %10.*f %6.2f %6.2f %-3s %10.3f %10.3f %9.3f %9.3f\n",
		       c, small ? "Mpps" : "MB/s", small ? 4 : 1, median(pv, n),
		       small ? 4 : 1, median(xv, n), m, want,
		       (m >= want ? "ok" : "LOW"), median(pc, n), median(xc, n),
		       median(xi, n), median(xt, n)
	}' "$tmp/results"
done
echo "ratio: xfer / perftest in one round, median of the rounds"
echo "perftest s/GB: server + client processes, user + sys (the client"
echo "  busy-polls; the server of a one-sided test mostly waits)"
echo "xfer s/GB: every thread of both engines (one process), reactors and"
echo "  RDMA workers, plus the submitting thread; not Soft-RoCE's kernel work"
