# xfer — top-level Makefile. The rules live in mk/*.mk.
#   make            libxfer.a, libxfer.so, libtransfer_engine.a and .so
#                   (Mooncake's C API; versioned sonames), xfer-bench
#   make setup      install every Debian package the build and tests need
#   make install    PREFIX (/usr/local), DESTDIR: headers, libraries,
#                   pkg-config files, programs, man pages; make uninstall
#   make docs       docs/CONFIG.md's and xfer.h's list of configuration
#                   keys from the code, Doxygen man pages and HTML
#   make test       the whole suite: unit, integration, examples, python
#   make test-unit | test-integration | test-examples | test-python
#   make test-tcponly  the unit tier of a build with no optional part
#                   (WITH_RDMA=no WITH_FILE=no WITH_REDIS=no WITH_ETCD=no)
#   make python     the Python extension module, in place (python/xfer/)
#   make test-asan  unit and integration tiers under ASan+UBSan (build/asan)
#   make fuzz       libFuzzer targets, FUZZ_SECONDS each (build/fuzz)
#   make soak       mixed load under ASan, SOAK_SECONDS (600); not in CI
#   V=1 shows the commands; WERROR=0 turns warnings back into warnings.

all:

include mk/config.mk
include mk/lib.mk
include mk/capi.mk
include mk/bench.mk
include mk/metad.mk
include mk/store.mk
include mk/install.mk
include mk/python.mk
include mk/test.mk
include mk/fuzz.mk
include mk/asan.mk

setup:
	@sh mk/setup.sh

clean:
	rm -rf $(BUILD)

.PHONY: all setup clean
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
