# make install / make uninstall (mk/install.sh), and make docs: the list
# of configuration keys in docs/CONFIG.md and xfer.h from the knob tables
# (make config-doc, mk/config_doc.sh), then Doxygen's man pages and HTML
# of the public headers, in $(BUILD)/doc. make install builds the latter
# only: it never writes the source tree.
#   make install [PREFIX=/usr/local] [DESTDIR=] [NODOCS=1]
# LIBDIR, INCLUDEDIR, BINDIR, PKGCONFIGDIR, MANDIR and DOCDIR follow
# PREFIX unless given. Installing into the system (no DESTDIR) as root
# runs LDCONFIG afterwards, so that programs find the new libraries.
PREFIX  ?= /usr/local
LDCONFIG ?= ldconfig
DOC_DIR := $(BUILD)/doc

docs: config-doc
	@$(MAKE) --no-print-directory $(DOC_DIR)/stamp

config-doc: $(BENCH)
	@sh mk/config_doc.sh $(BENCH)

$(DOC_DIR)/stamp: $(wildcard include/xfer/*.h) mk/Doxyfile
	@command -v doxygen >/dev/null || { echo "docs: no doxygen (make" \
		"setup installs it; make install NODOCS=1 goes without)" >&2; \
		exit 1; }
	@$(if $(Q),echo "  DOXYGEN $(DOC_DIR)")
	$(Q)rm -rf $(DOC_DIR) && mkdir -p $(DOC_DIR)
	$(Q)XFER_VERSION=$(VERSION) XFER_DOC_DIR=$(DOC_DIR) doxygen mk/Doxyfile
	$(Q)touch $@

INSTALL_ENV = BUILD=$(BUILD) VERSION=$(VERSION) \
	VERSION_MAJOR=$(VERSION_MAJOR) PKGS="$(PKGS)" PREFIX=$(PREFIX) \
	DESTDIR=$(DESTDIR) NODOCS=$(NODOCS) LDCONFIG="$(LDCONFIG)" \
	$(foreach v,BINDIR LIBDIR INCLUDEDIR PKGCONFIGDIR MANDIR DOCDIR,\
		$(if $($(v)),$(v)=$($(v))))

install: all $(if $(NODOCS),,$(DOC_DIR)/stamp)
	@$(INSTALL_ENV) sh mk/install.sh install

uninstall:
	@$(INSTALL_ENV) sh mk/install.sh uninstall

.PHONY: docs config-doc install uninstall
