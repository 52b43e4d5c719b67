#!/bin/sh
# make install / make uninstall: what mk/install.mk runs.
#   mk/install.sh install     headers, libraries (static, shared with their
#                             soname links), pkg-config files, programs,
#                             man pages and HTML from Doxygen
#   mk/install.sh uninstall   remove what install put there
# Every path is under DESTDIR (empty: the system); the directories come
# from the environment (PREFIX, BINDIR, LIBDIR, INCLUDEDIR, PKGCONFIGDIR,
# MANDIR, DOCDIR), as do BUILD, VERSION, VERSION_MAJOR, PKGS and NODOCS.
# install writes the list of what it put in DOCDIR/install_manifest.txt;
# uninstall removes exactly that list, then the folders that are xfer's
# own (INCLUDEDIR/xfer, DOCDIR) once empty.
# Into the system (no DESTDIR) as root, both then run LDCONFIG (default
# ldconfig) and say so: the loader's cache must know the libraries before
# a program linked with -ltransfer_engine starts. A LIBDIR the loader
# does not search (one of /opt, a home) gets a RUNPATH in the pkg-config
# files' Libs instead.
set -eu
action=${1:?usage: mk/install.sh install|uninstall}
: "${BUILD:=build}" "${PREFIX:=/usr/local}" "${DESTDIR:=}" "${NODOCS:=}"
: "${LDCONFIG:=ldconfig}"
: "${BINDIR:=$PREFIX/bin}" "${LIBDIR:=$PREFIX/lib}"
: "${INCLUDEDIR:=$PREFIX/include}" "${PKGCONFIGDIR:=$LIBDIR/pkgconfig}"
: "${MANDIR:=$PREFIX/share/man}" "${DOCDIR:=$PREFIX/share/doc/xfer}"
D=$DESTDIR
manifest=$DOCDIR/install_manifest.txt
PATH=$PATH:/sbin:/usr/sbin

# Whether the loader searches LIBDIR: a folder of ld.so.conf or a built-in
# one, as this host's ldconfig lists them (-N -X: it changes nothing).
on_loader_path() {
	want=$(readlink -m "$LIBDIR")
	for dir in /lib /usr/lib /lib64 /usr/lib64 $(ldconfig -v -N -X \
		2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p'); do
		[ "$(readlink -m "$dir")" = "$want" ] && return 0
	done
	return 1
}

# After install or uninstall: the loader's cache, when it is ours to update.
update_cache() {
	if [ -n "$D" ]; then
		on_loader_path && echo "DESTDIR install: run ldconfig on" \
			"the target system once the files are there"
		return 0
	fi
	if [ "$(id -u)" != 0 ]; then
		on_loader_path && echo "not root, so ldconfig was not run:" \
			"run it as root before starting programs linked" \
			"against $LIBDIR"
		return 0
	fi
	$LDCONFIG || { echo "$LDCONFIG failed" >&2; exit 1; }
	if on_loader_path; then
		echo "ran $LDCONFIG: the loader finds the libraries in $LIBDIR"
	else
		echo "ran $LDCONFIG; $LIBDIR is not on the loader's path:" \
			"programs linked with pkg-config carry a RUNPATH to it"
	fi
}

if [ "$action" = uninstall ]; then
	[ -f "$D$manifest" ] || {
		echo "uninstall: nothing installed here (no $D$manifest)" >&2
		exit 1
	}
	while IFS= read -r f; do
		rm -f "$D$f"
	done <"$D$manifest"
	rm -f "$D$manifest"
	for dir in "$INCLUDEDIR/xfer" "$DOCDIR"; do
		[ -d "$D$dir" ] &&
			find "$D$dir" -depth -type d -empty -exec rmdir {} \;
	done
	echo "uninstalled xfer from ${D:-}$PREFIX"
	update_cache
	exit 0
fi
[ "$action" = install ] || { echo "mk/install.sh: $action?" >&2; exit 1; }
: "${VERSION:?}" "${VERSION_MAJOR:?}" "${PKGS:?}"

list=$(mktemp)
trap 'rm -f "$list"' EXIT

# put MODE FILE DIR: install FILE into DIR, and list it.
put() {
	install -d "$D$3"
	install -m "$1" "$2" "$D$3/"
	echo "$3/$(basename "$2")" >>"$list"
}

# link TARGET NAME DIR: a symbolic link DIR/NAME -> TARGET, listed.
link() {
	ln -sfn "$1" "$D$3/$2"
	echo "$3/$2" >>"$list"
}

# A library: the archive, the shared object and its two links.
library() {
	put 644 "$BUILD/lib$1.a" "$LIBDIR"
	put 755 "$BUILD/lib$1.so.$VERSION" "$LIBDIR"
	link "lib$1.so.$VERSION" "lib$1.so.$VERSION_MAJOR" "$LIBDIR"
	link "lib$1.so.$VERSION_MAJOR" "lib$1.so" "$LIBDIR"
}

# A pkg-config file from mk/NAME.pc.in.
rpath='-Wl,-rpath,${libdir} '
on_loader_path && rpath=
pc() {
	install -d "$D$PKGCONFIGDIR"
	sed -e "s|@PREFIX@|$PREFIX|" -e "s|@LIBDIR@|$LIBDIR|" \
	    -e "s|@RPATH@|$rpath|" \
	    -e "s|@INCLUDEDIR@|$INCLUDEDIR|" -e "s|@VERSION@|$VERSION|" \
	    -e "s|@PKGS@|$(echo "$PKGS" | sed 's/  */, /g')|" \
	    "mk/$1.pc.in" >"$D$PKGCONFIGDIR/$1.pc"
	chmod 644 "$D$PKGCONFIGDIR/$1.pc"
	echo "$PKGCONFIGDIR/$1.pc" >>"$list"
}

for h in include/xfer/*.h; do
	put 644 "$h" "$INCLUDEDIR/xfer"
done
library xfer
library transfer_engine
pc xfer
pc transfer_engine
put 755 "$BUILD/xfer-bench" "$BINDIR"
put 755 "$BUILD/xfer-metad" "$BINDIR"
# The man pages of the public calls and of the headers (Doxygen makes one
# for every field name too, "addr.3", "length.3": those stay out).
man_pages() {
	awk '/^XFER_(TE_)?EXPORT$/ { getline; sub(/\(.*/, "");
		n = split($0, w, /[ *]+/); print w[n] ".3" }' include/xfer/*.h
	for h in include/xfer/*.h; do
		echo "$(basename "$h").3"
	done
}

if [ -z "$NODOCS" ]; then
	for m in $(man_pages); do
		put 644 "$BUILD/doc/man/man3/$m" "$MANDIR/man3"
	done
	(cd "$BUILD/doc/html" && find . -type f) | while IFS= read -r f; do
		f=${f#./}
		put 644 "$BUILD/doc/html/$f" "$DOCDIR/html/$(dirname "$f")"
	done
fi
install -d "$D$DOCDIR"
echo "$manifest" >>"$list"
sed 's|/\./|/|; s|/\.$||' "$list" >"$D$manifest"
echo "installed xfer $VERSION in ${D:-}$PREFIX ($(wc -l <"$list") files)"
update_cache
