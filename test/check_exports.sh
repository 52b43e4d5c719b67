#!/bin/sh
# A shared library exports exactly the calls its public headers declare:
# fails on an exported symbol that no header declares, and on a declared
# call that is not exported. A declaration follows a line holding only
# the export macro.
#   test/check_exports.sh build/libxfer.so.1.0.0
#       (XFER_EXPORT in include/xfer/*.h)
#   test/check_exports.sh build/libtransfer_engine.so.1.0.0 XFER_TE_EXPORT \
#       include/xfer/transfer_engine_c.h
set -eu
lib=$1
macro=${2:-XFER_EXPORT}
[ $# -gt 2 ] && shift 2 || set -- include/xfer/*.h
declared=$(mktemp) exported=$(mktemp)
trap 'rm -f "$declared" "$exported"' EXIT

# The name before the '(' of the line after each macro line.
awk -v m="$macro" '$0 == m { getline; sub(/\(.*/, ""); n = split($0, w, /[ *]+/);
	print w[n] }' "$@" | sort -u >"$declared"
nm -D --defined-only "$lib" | awk '{ print $3 }' | sort -u >"$exported"

extra=$(comm -13 "$declared" "$exported")
missing=$(comm -23 "$declared" "$exported")
if [ -n "$extra" ] || [ -n "$missing" ]; then
	[ -z "$extra" ] || echo "$lib: exported but not declared in $*:" $extra
	[ -z "$missing" ] || echo "$lib: declared in $* but not exported:" $missing
	exit 1
fi
echo "exports: $(wc -l <"$exported") symbols of $(basename "$lib"), all declared in $*"
