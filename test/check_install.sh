#!/bin/sh
# make install into a temporary DESTDIR (PREFIX /opt/xfer): headers, both
# libraries with their sonames and links, pkg-config files, programs, man
# pages; programs outside the tree built with `pkg-config --cflags --libs`
# against it (xfer's API, Mooncake's C API, and the C API linked
# statically) must run; make uninstall must leave no file behind.
# Then without LD_LIBRARY_PATH: a program linked against the build tree,
# and one built with the docs' line `cc prog.c $(pkg-config --cflags
# --libs transfer_engine)` against a prefix installed without DESTDIR
# (where root runs ldconfig: a stand-in here records that it ran).
#   test/check_install.sh [BUILD]      (from the repository root)
set -eu
build=${1:-build}
make=${MAKE:-make}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
P=/opt/xfer
fail() { echo "check_install: $*" >&2; exit 1; }

$make -s install BUILD="$build" DESTDIR="$D" PREFIX="$P" >/dev/null ||
	fail "make install failed"

for f in include/xfer/xfer.h include/xfer/event.h \
	 include/xfer/transfer_engine_c.h lib/libxfer.a lib/libxfer.so.1.0.0 \
	 lib/libtransfer_engine.a lib/libtransfer_engine.so.1.0.0 \
	 lib/pkgconfig/xfer.pc lib/pkgconfig/transfer_engine.pc \
	 bin/xfer-bench bin/xfer-metad share/man/man3/xfer.h.3 \
	 share/man/man3/transfer_engine_c.h.3 share/man/man3/xfer_engine_new.3 \
	 share/man/man3/createTransferEngine.3 share/doc/xfer/html/index.html; do
	[ -f "$D$P/$f" ] || fail "not installed: $P/$f"
done
for l in xfer transfer_engine; do
	[ "$(readlink "$D$P/lib/lib$l.so")" = "lib$l.so.1" ] &&
	[ "$(readlink "$D$P/lib/lib$l.so.1")" = "lib$l.so.1.0.0" ] ||
		fail "lib$l.so links"
	readelf -d "$D$P/lib/lib$l.so.1.0.0" | grep -q "SONAME.*\[lib$l.so.1\]" ||
		fail "lib$l.so.1.0.0: soname"
done
grep -q createTransferEngine "$D$P/share/man/man3/transfer_engine_c.h.3" ||
	fail "transfer_engine_c.h.3 does not document createTransferEngine"

# Programs outside the tree, as a user builds them.
cat >"$D/with_xfer.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <xfer/xfer.h>

int main(void)
{
	static char a[65536], b[65536];
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_engine *e;
	struct xfer_batch *bt;
	struct xfer_request r;
	int64_t self;

	xfer_config_set(cfg, "bind_addr", "127.0.0.1");
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	if (!e || xfer_register(e, a, sizeof(a), "cpu:0", true) ||
	    xfer_register(e, b, sizeof(b), "cpu:0", true))
		return 1;
	memset(a, 7, sizeof(a));
	self = xfer_segment_open(e, xfer_engine_name(e));
	r = (struct xfer_request){ XFER_WRITE, a, self, (uintptr_t)b,
				   sizeof(a) };
	bt = xfer_batch_new(e, 1);
	if (self < 0 || !bt || xfer_batch_submit(bt, &r, 1) ||
	    xfer_batch_wait(bt, 10000) || memcmp(a, b, sizeof(a)))
		return 1;
	xfer_batch_free(bt);
	xfer_engine_free(e);
	puts("xfer: ok");
	return 0;
}
EOF
cat >"$D/with_te.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "transfer_engine_c.h"

int main(void)
{
	static char a[65536], b[65536];
	transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1",
						   NULL, 0, 0);
	struct transfer_request r = { OPCODE_WRITE, a, LOCAL_SEGMENT, 0,
				      (uint64_t)(uintptr_t)b, sizeof(a) };
	struct transfer_status st = { STATUS_WAITING, 0 };
	batch_id_t id;

	if (!e || registerLocalMemory(e, a, sizeof(a), "cpu:0", 1) ||
	    registerLocalMemory(e, b, sizeof(b), "cpu:0", 1))
		return 1;
	memset(a, 9, sizeof(a));
	id = allocateBatchID(e, 1);
	if (id == INVALID_BATCH || submitTransfer(e, id, &r, 1))
		return 1;
	while (st.status == STATUS_WAITING)
		if (getTransferStatus(e, id, 0, &st))
			return 1;
	if (st.status != STATUS_COMPLETED || memcmp(a, b, sizeof(a)) ||
	    freeBatchID(e, id))
		return 1;
	destroyTransferEngine(e);
	puts("transfer_engine: ok");
	return 0;
}
EOF
export PKG_CONFIG_PATH="$D$P/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D"
lib="$D$P/lib"
for p in with_xfer:xfer with_te:transfer_engine; do
	src=${p%%:*} pc=${p#*:}
	# shellcheck disable=SC2046
	cc -o "$D/$src" "$D/$src.c" $(pkg-config --cflags --libs "$pc") ||
		fail "$src.c does not build with pkg-config $pc"
	LD_LIBRARY_PATH="$lib" ldd "$D/$src" | grep -q "$lib/lib$pc.so.1" ||
		fail "$src does not load $lib/lib$pc.so.1"
	LD_LIBRARY_PATH="$lib" "$D/$src" || fail "$src failed"
done
# The static archives, with what pkg-config --static says they need.
libs=$(pkg-config --static --libs transfer_engine |
	sed -e 's/-ltransfer_engine /-l:libtransfer_engine.a /' \
	    -e 's/-lxfer /-l:libxfer.a /')
# shellcheck disable=SC2086
cc -o "$D/with_te_static" "$D/with_te.c" \
	$(pkg-config --cflags transfer_engine) $libs ||
	fail "with_te.c does not link statically: $libs"
ldd "$D/with_te_static" | grep -q "libxfer\|libtransfer_engine" &&
	fail "with_te_static loads a shared xfer"
"$D/with_te_static" | sed 's/^/static /' || fail "with_te_static failed"

# Without LD_LIBRARY_PATH. The build tree: libtransfer_engine's RUNPATH
# $ORIGIN finds libxfer.so.1 beside it, at link and at run time.
readelf -d "$build/libtransfer_engine.so" | grep -q 'RUNPATH.*\[\$ORIGIN\]' ||
	fail "libtransfer_engine.so has no RUNPATH \$ORIGIN"
tree=$(cd "$build" && pwd)
cc -o "$D/tree_te" "$D/with_te.c" -Iinclude/xfer -L"$tree" -ltransfer_engine \
	-Wl,-rpath,"$tree" || fail "with_te.c does not link against $build"
env -u LD_LIBRARY_PATH "$D/tree_te" >/dev/null ||
	fail "a program linked against $build does not run"
# A prefix installed without DESTDIR, as `make install` into the system.
S=$D/stage
printf '#!/bin/sh\necho ran >>"%s"\n' "$D/ldconfig.calls" >"$D/ldconfig"
chmod +x "$D/ldconfig"
out=$($make -s install BUILD="$build" PREFIX="$S" NODOCS=1 \
	LDCONFIG="$D/ldconfig") || fail "make install PREFIX=$S failed"
if [ "$(id -u)" = 0 ]; then
	[ "$(cat "$D/ldconfig.calls" 2>/dev/null)" = ran ] ||
		fail "make install as root did not run ldconfig once"
	echo "$out" | grep -q "^ran $D/ldconfig" ||
		fail "make install did not say it ran ldconfig: $out"
elif [ -e "$D/ldconfig.calls" ]; then
	fail "make install ran ldconfig without being root"
fi
grep -q '^Libs: .*-Wl,-rpath,${libdir}' "$S/lib/pkgconfig/transfer_engine.pc" ||
	fail "transfer_engine.pc: no RUNPATH for a libdir off the loader's path"
# shellcheck disable=SC2046
cc -o "$D/staged_te" "$D/with_te.c" $(PKG_CONFIG_PATH="$S/lib/pkgconfig" \
	PKG_CONFIG_SYSROOT_DIR= pkg-config --cflags --libs transfer_engine) ||
	fail "with_te.c does not build with the docs' pkg-config line"
env -u LD_LIBRARY_PATH ldd "$D/staged_te" |
	grep -q "$S/lib/libxfer.so.1" || fail "staged_te does not load $S's libxfer"
env -u LD_LIBRARY_PATH "$D/staged_te" >/dev/null ||
	fail "a program built against $S does not run"
$make -s uninstall BUILD="$build" PREFIX="$S" LDCONFIG="$D/ldconfig" \
	>/dev/null || fail "make uninstall PREFIX=$S failed"

$make -s uninstall BUILD="$build" DESTDIR="$D" PREFIX="$P" >/dev/null ||
	fail "make uninstall failed"
left=$(cd "$D" && find ./opt ./stage ! -type d)
[ -z "$left" ] || fail "left after uninstall: $left"
if $make -s uninstall BUILD="$build" DESTDIR="$D" PREFIX="$P" \
	>/dev/null 2>&1; then
	fail "a second uninstall did not say there is nothing to remove"
fi
echo "install: headers, libraries, pkg-config, programs, man pages in" \
     "DESTDIR; outside programs built and run, also without" \
     "LD_LIBRARY_PATH (build tree, staged prefix); uninstalled clean"
