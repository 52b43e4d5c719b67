#!/usr/bin/env bash
# xfer's file segments against fio on the same file, on disk and on tmpfs:
# fio --ioengine=io_uring and xfer-bench --mode loopback --file (the local
# path, io_uring) with the same block size, queue depth and direction, one
# line each with two ratios xfer / fio (medium() says which); then the
# remote path (a target process serving the file, an initiator with
# XFER_FILE_LOCAL=0) at 1 MiB next to TCP RAM-to-RAM between the same two
# processes. xfer moves each request as one read or write (the runs of
# its slices); both tools go over the same footprint, the bench's region
# (queue depth x block size) at the start of the file. Fails only when a
# tool fails, not on a low ratio.
#   DURATION=10 bench/file_speed.sh   (seconds per run; FILE_DIR=/var/tmp,
#   DISK_SIZE=1073741824, TMPFS_SIZE=536870912, QUEUE_DEPTH=32)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
FILE_DIR=${FILE_DIR:-/var/tmp}
DISK_SIZE=${DISK_SIZE:-$((1 << 30))}
TMPFS_SIZE=${TMPFS_SIZE:-$((512 << 20))}
QD=${QUEUE_DEPTH:-32}
BENCH=build/xfer-bench
# xfer's batch and io_uring depth both match fio's iodepth
export XFER_FILE_QUEUE_DEPTH=$QD

die() { echo "file_speed.sh: $1" >&2; exit 1; }

[ -x "$BENCH" ] || make -s
command -v fio >/dev/null || die "fio not found (make setup)"

pids=()
tmp=$(mktemp -d)
disk_file=$(mktemp "$FILE_DIR/xfer-file-speed.XXXXXX")
tmpfs_file=$(mktemp /dev/shm/xfer-file-speed.XXXXXX)
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp" "$disk_file" "$tmpfs_file"' EXIT
. bench/target.sh

# json PATH: the field at PATH (a.0.b: list items by index) of the JSON
# object on stdin, in GB when it counts bytes.
json() {
	python3 -c '
import json, sys
v = json.load(sys.stdin)
for p in sys.argv[1].split("."):
    v = v[int(p)] if isinstance(v, list) else v[p]
print(v / 1e9 if sys.argv[1].endswith("bytes") else v)' "$1"
}

# fio_run FILE SIZE DIRECT OP BS [FIO_ARGS...]: fio's GB/s, or with
# "prep" as OP the file written once, fully, so reads never hit holes.
fio_run() {
	local file=$1 size=$2 direct=$3 op=$4 bs=$5 out
	local args=(--name=xfer --filename="$file" --ioengine=io_uring
		--bs="$bs" --iodepth="$QD" --direct="$direct" --size="$size"
		--output-format=json)

	if [ "$op" = prep ]; then
		fio "${args[@]}" --rw=write --end_fsync=1 >/dev/null ||
			die "fio could not write $file"
		return
	fi
	out=$(timeout $((DURATION + 60)) fio "${args[@]}" "${@:6}" \
		--rw="$op" --runtime="$DURATION" --time_based) ||
		die "fio $op $bs failed"
	json "jobs.0.$op.bw_bytes" <<<"$out"
}

# xfer_run ARGS...: xfer-bench's GB/s (one thread, one batch of QD
# requests at a time, unless ARGS say otherwise).
xfer_run() {
	local out
	out=$(timeout $((DURATION + 60)) "$BENCH" --protocol tcp \
		--batch_size "$QD" --threads 1 --duration "$DURATION" --json \
		"$@") ||
		die "xfer-bench $* failed"
	json throughput_gbps <<<"$out"
}

label() { [ "$1" -ge $((1 << 20)) ] && echo "$(($1 >> 20))MiB" || echo "$(($1 >> 10))KiB"; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { printf "%.2f", (y > 0 ? x / y : 0) }'; }

# medium FILE SIZE DIRECT NAME: the local path against fio, two ways
# each at the same depth and footprint. Kept full: fio's iodepth against
# two xfer threads with a batch of QD/2 each (one refills while the
# other waits). One batch at a time: fio told to submit QD and reap all
# QD before the next (iodepth_batch_submit, iodepth_batch_complete_min)
# against one xfer thread with one batch of QD, as Mooncake's bench
# submits; there the slowest request of each batch idles the queue.
medium() {
	local file=$1 size=$2 direct=$3 name=$4 bs op f fb x xb

	fio_run "$file" "$size" "$direct" prep 1M
	for bs in $((64 << 10)) $((1 << 20)); do
		for op in read write; do
			f=$(fio_run "$file" $((QD * bs)) "$direct" "$op" "$bs")
			x=$(xfer_run --mode loopback --file "$file" \
				--buffer_size "$size" --block_size "$bs" \
				--operation "$op" --threads 2 \
				--batch_size $((QD / 2)))
			fb=$(fio_run "$file" $((QD * bs)) "$direct" "$op" "$bs" \
				--iodepth_batch_submit="$QD" \
				--iodepth_batch_complete_min="$QD")
			xb=$(xfer_run --mode loopback --file "$file" \
				--buffer_size "$size" --block_size "$bs" \
				--operation "$op")
			printf 'file %s %s %s: kept full: xfer %.2f GB/s, fio %.2f GB/s, ratio %s; one batch at a time: xfer %.2f, fio %.2f, ratio %s\n' \
				"$op" "$(label "$bs")" "$name" "$x" "$f" \
				"$(ratio "$x" "$f")" "$xb" "$fb" "$(ratio "$xb" "$fb")"
		done
	done
}

medium "$disk_file" "$DISK_SIZE" 1 disk
medium "$tmpfs_file" "$TMPFS_SIZE" 0 tmpfs

# The remote path: only the initiator goes through the owner.
bs=$((1 << 20))
region=$((QD * bs))
declare -A tcp
target_start --duration 0 --buffer_size "$region"
for op in read write; do
	tcp[$op]=$(xfer_run --mode initiator --segment_id "$target_name" \
		--buffer_size "$region" --block_size "$bs" --operation "$op")
done
target_stop
for m in "disk $disk_file $DISK_SIZE" "tmpfs $tmpfs_file $TMPFS_SIZE"; do
	read -r name file size <<<"$m"
	target_start --duration 0 --file "$file" --buffer_size "$size"
	for op in read write; do
		x=$(XFER_FILE_LOCAL=0 xfer_run --mode initiator \
			--segment_id "$target_name" --file "$file" \
			--buffer_size "$region" --block_size "$bs" --operation "$op")
		printf 'file remote %s %s %s: %.2f GB/s; tcp ram-to-ram %.2f GB/s\n' \
			"$op" "$(label "$bs")" "$name" "$x" "${tcp[$op]}"
	done
	target_stop
done
