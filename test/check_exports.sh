#!/bin/sh
# The shared library exports exactly the calls declared in include/xfer/:
# fails on an exported symbol that no public header declares, and on a
# declared call that is not exported.
#   test/check_exports.sh build/libxfer.so.1.0.0
set -eu
lib=$1
declared=$(mktemp) exported=$(mktemp)
trap 'rm -f "$declared" "$exported"' EXIT

# Every declaration follows an XFER_EXPORT line: the name before its '('.
awk '/^XFER_EXPORT$/ { getline; sub(/\(.*/, ""); n = split($0, w, /[ *]+/);
	print w[n] }' include/xfer/*.h | sort -u >"$declared"
nm -D --defined-only "$lib" | awk '{ print $3 }' | sort -u >"$exported"

extra=$(comm -13 "$declared" "$exported")
missing=$(comm -23 "$declared" "$exported")
if [ -n "$extra" ] || [ -n "$missing" ]; then
	[ -z "$extra" ] || echo "exported but not declared in include/xfer/:" $extra
	[ -z "$missing" ] || echo "declared but not exported:" $missing
	exit 1
fi
echo "exports: $(wc -l <"$exported") symbols, all declared in include/xfer/"
