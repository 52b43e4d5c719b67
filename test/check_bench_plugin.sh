#!/bin/sh
# xfer-bench --plugin in loopback mode, one second each way with --verify
# and --json: it must exit 0, say the bytes checked out, move batches and
# report the loop's stalls as numbers.
#   test/check_bench_plugin.sh build/xfer-bench
set -eu
bench=${1:-build/xfer-bench}

for op in read write; do
	"$bench" --mode loopback --protocol tcp --threads 1 --plugin \
		--operation "$op" --duration 1 --verify --json | python3 -c '
import json, sys
op, r = sys.argv[1], json.loads(sys.stdin.read())
mx, p99 = r.get("loop_stall_max_ms"), r.get("loop_stall_p99_ms")
if r.get("verified") is not True or not r.get("batches") or \
   not all(isinstance(v, (int, float)) for v in (mx, p99)) or \
   not 0 < p99 <= mx:
    sys.exit("bench --plugin %s: bad report %s" % (op, json.dumps(r)))
print("bench --plugin %s: verified, %d batches, loop stall max %.2f ms, "
      "p99 %.2f ms" % (op, r["batches"], mx, p99))
' "$op"
done
