#!/usr/bin/env bash
# xfer's file segments against fio on the same file, on disk and on tmpfs:
# fio --ioengine=io_uring and xfer-bench --mode loopback --file (the local
# path, io_uring) with the same block size, queue depth and direction, one
# line each with two ratios xfer / fio (medium() says which); then the
# remote path (a target process serving the file, an initiator with
# XFER_FILE_LOCAL=0) at 1 MiB next to TCP RAM-to-RAM between the same two
# processes. xfer moves each request as one read or write (the runs of
# its slices); both tools go over the same footprint, the bench's region
# (queue depth x block size) at the start of the file. With --rounds N
# each local figure is the median of N rounds and each ratio the median
# of the rounds' ratios: a shared virtual disk moves one run by a third
# or more. Both tools' buffers sit on transparent huge pages (fio's
# through glibc's malloc tunable, xfer's with --hugepages): on 4 KiB
# pages scattered in memory a 64 KiB O_DIRECT request is sixteen
# segments, and a virtual disk without indirect descriptors then runs
# out of ring slots (docs/BENCH.md); HUGEPAGES=0 leaves both on 4 KiB
# pages. Fails only when a tool fails, not on a low ratio.
#   DURATION=10 bench/file_speed.sh [--rounds N]  (seconds per run;
#   FILE_DIR=/var/tmp, DISK_SIZE=1073741824, TMPFS_SIZE=536870912,
#   QUEUE_DEPTH=32, HUGEPAGES=1)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
FILE_DIR=${FILE_DIR:-/var/tmp}
DISK_SIZE=${DISK_SIZE:-$((1 << 30))}
TMPFS_SIZE=${TMPFS_SIZE:-$((512 << 20))}
QD=${QUEUE_DEPTH:-32}
BENCH=build/xfer-bench
fio_env=() xfer_huge=()
if [ "${HUGEPAGES:-1}" != 0 ]; then
	fio_env=(GLIBC_TUNABLES=glibc.malloc.hugetlb=1)
	xfer_huge=(--hugepages)
fi
# xfer's batch and io_uring depth both match fio's iodepth
export XFER_FILE_QUEUE_DEPTH=$QD

die() { echo "file_speed.sh: $1" >&2; exit 1; }

. bench/target.sh
rounds_arg "$@"

[ -x "$BENCH" ] || make -s
command -v fio >/dev/null || die "fio not found (make setup)"

pids=()
tmp=$(mktemp -d)
disk_file=$(mktemp "$FILE_DIR/xfer-file-speed.XXXXXX")
tmpfs_file=$(mktemp /dev/shm/xfer-file-speed.XXXXXX)
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp" "$disk_file" "$tmpfs_file"' EXIT

# fio_run FILE SIZE DIRECT OP BS [FIO_ARGS...]: fio's GB/s, or with
# "prep" as OP the file written once, fully, so reads never hit holes.
fio_run() {
	local file=$1 size=$2 direct=$3 op=$4 bs=$5 out
	local args=(--name=xfer --filename="$file" --ioengine=io_uring
		--bs="$bs" --iodepth="$QD" --direct="$direct" --size="$size"
		--output-format=json)

	[ ${#fio_env[@]} = 0 ] || args+=(--mem_align=2m) # a whole huge page

	if [ "$op" = prep ]; then
		fio "${args[@]}" --rw=write --end_fsync=1 >/dev/null ||
			die "fio could not write $file"
		return
	fi
	out=$(env "${fio_env[@]}" timeout $((DURATION + 60)) fio \
		"${args[@]}" "${@:6}" --rw="$op" --runtime="$DURATION" \
		--time_based) ||
		die "fio $op $bs failed"
	json "jobs.0.$op.bw_bytes" <<<"$out" | awk '{ print $1 / 1e9 }'
}

# xfer_run ARGS...: xfer-bench's GB/s (one thread, one batch of QD
# requests at a time, unless ARGS say otherwise).
xfer_run() {
	local out
	out=$(timeout $((DURATION + 60)) "$BENCH" --protocol tcp \
		--batch_size "$QD" --threads 1 --duration "$DURATION" --json \
		"${xfer_huge[@]}" "$@") ||
		die "xfer-bench $* failed"
	json throughput_gbps <<<"$out"
}

label() { [ "$1" -ge $((1 << 20)) ] && echo "$(($1 >> 20))MiB" || echo "$(($1 >> 10))KiB"; }

# medium FILE SIZE DIRECT NAME: the local path against fio, two ways
# each at the same depth and footprint. Kept full: fio's iodepth, which
# submits again as each request ends, against QD batches of one request
# each on one thread's event loop, each submitted again from the
# callback of the one before (--plugin), as an async server keeps a
# device busy. One batch at a time: fio told to submit QD and reap all
# QD before the next (iodepth_batch_submit, iodepth_batch_complete_min)
# against one xfer thread with one batch of QD, as Mooncake's bench
# submits; there the slowest request of each batch idles the queue.
medium() {
	local file=$1 size=$2 direct=$3 name=$4 bs op k f fb x xb

	fio_run "$file" "$size" "$direct" prep 1M
	for _ in $(seq "$ROUNDS"); do
		for bs in $((64 << 10)) $((1 << 20)); do
			for op in read write; do
				k="$name.$op.$bs"
				f=$(fio_run "$file" $((QD * bs)) "$direct" "$op" "$bs")
				x=$(xfer_run --mode loopback --file "$file" \
					--buffer_size "$size" --block_size "$bs" \
					--operation "$op" --plugin --threads "$QD" \
					--batch_size 1)
				fb=$(fio_run "$file" $((QD * bs)) "$direct" "$op" \
					"$bs" --iodepth_batch_submit="$QD" \
					--iodepth_batch_complete_min="$QD")
				xb=$(xfer_run --mode loopback --file "$file" \
					--buffer_size "$size" --block_size "$bs" \
					--operation "$op")
				add "$k.f" "$f"; add "$k.x" "$x"
				add "$k.r" "$(ratio "$x" "$f")"
				add "$k.fb" "$fb"; add "$k.xb" "$xb"
				add "$k.rb" "$(ratio "$xb" "$fb")"
			done
		done
	done
	for bs in $((64 << 10)) $((1 << 20)); do
		for op in read write; do
			k="$name.$op.$bs"
			printf 'file %s %s %s: kept full: xfer %.2f GB/s, fio %.2f GB/s, ratio %.2f; one batch at a time: xfer %.2f, fio %.2f, ratio %.2f\n' \
				"$op" "$(label "$bs")" "$name" "$(median "$k.x")" \
				"$(median "$k.f")" "$(median "$k.r")" \
				"$(median "$k.xb")" "$(median "$k.fb")" \
				"$(median "$k.rb")"
		done
	done
}

[ "$ROUNDS" -gt 1 ] && echo "local path: medians of $ROUNDS rounds of ${DURATION} s runs"
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
