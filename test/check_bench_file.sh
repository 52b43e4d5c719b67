#!/bin/sh
# xfer-bench --file with --verify and --json, one second each way: in
# loopback mode (the file read and written here with io_uring), then a
# target process serving the file and an initiator with XFER_FILE_LOCAL=0
# that reaches it through the target's file data port. Each run must exit
# 0, say the bytes checked out and move batches. One loopback run has its
# buffers on transparent huge pages (--hugepages).
#   test/check_bench_file.sh build/xfer-bench
set -eu
bench=${1:-build/xfer-bench}
dir=$(mktemp -d)
target=
trap '[ -z "$target" ] || kill "$target" 2>/dev/null; rm -rf "$dir"' EXIT
file=$dir/segment
# 32 blocks of 64 KiB: a 2 MiB region in a 4 MiB file
sizes="--protocol tcp --threads 1 --batch_size 32 --block_size 65536
	--buffer_size 4194304"

# check WHAT: the JSON report on stdin moved bytes from a file, verified.
check() {
	python3 -c '
import json, sys
what, out = sys.argv[1], sys.stdin.read()
try:
    r = json.loads(out)
except ValueError:
    sys.exit("bench --file %s: no report (%r)" % (what, out))
if r.get("segment") != "file" or r.get("verified") is not True or \
   not r.get("batches") or not r.get("throughput_gbps", 0) > 0:
    sys.exit("bench --file %s: bad report %s" % (what, json.dumps(r)))
print("bench --file %s: verified, %d batches, %.2f GB/s" %
      (what, r["batches"], r["throughput_gbps"]))
' "$1"
}

for op in read write; do
	# shellcheck disable=SC2086
	"$bench" --mode loopback --file "$file" --operation "$op" $sizes \
		--duration 1 --verify --json | check "loopback $op"
done
# shellcheck disable=SC2086
"$bench" --mode loopback --file "$file" --operation read $sizes \
	--duration 1 --verify --json --hugepages |
	check "loopback read --hugepages"

rm -f "$file"
: >"$dir/target.out" # the loop below may look before the target starts
# shellcheck disable=SC2086
"$bench" --mode target --bind_addr 127.0.0.1 --duration 0 --file "$file" \
	$sizes --verify >"$dir/target.out" &
target=$!
i=0
until grep -q 'segment' "$dir/target.out"; do
	kill -0 "$target" 2>/dev/null || { echo "bench --file: target died" >&2; exit 1; }
	i=$((i + 1))
	[ "$i" -lt 200 ] || { echo "bench --file: target never served" >&2; exit 1; }
	sleep 0.05
done
name=$(awk '/segment/ { print $NF; exit }' "$dir/target.out")
for op in read write; do
	# shellcheck disable=SC2086
	XFER_FILE_LOCAL=0 "$bench" --mode initiator --segment_id "$name" \
		--file "$file" --operation "$op" $sizes --duration 1 --verify \
		--json | check "remote $op"
done
kill -TERM "$target"
wait "$target" || { echo "bench --file: target failed" >&2; exit 1; }
target=
