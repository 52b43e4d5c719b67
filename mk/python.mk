# The Python package (python/): xfer._xfer, a C extension module, built in
# place against libxfer.a for the tests (make python); installed with
#   pip install --no-build-isolation ./python
# and python/mooncake-compat, the `mooncake` package (mooncake.engine) for
# programs written for Mooncake, installed beside it.
# Its setup.py takes its flags from pkg-config's xfer package: this
# build's, $(BUILD)/pkgconfig/xfer.pc (make python-lib writes it, with
# the library), or an installed one. PYTHON is Debian's interpreter, whose
# packages (python3-pytest) the tests use.
PYTHON  ?= $(firstword $(wildcard /usr/bin/python3) python3)
PY_PC   := $(BUILD)/pkgconfig/xfer.pc
PY_DEPS := $(wildcard python/src/*.c python/src/*.h) python/setup.py \
           $(PY_PC)
PY_EXT  := python/xfer/_xfer$(shell $(PYTHON) -c \
	'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' \
	2>/dev/null)
PY_TMP  := $(abspath $(BUILD))/python

python: $(PY_EXT)

python-lib: $(LIB_A) $(PY_PC)

# mk/xfer.pc.in with this tree's paths; rewritten when PKGS or the paths
# change (it is remade each run, replaced only when it differs).
PY_COMMA := ,
$(PY_PC): mk/xfer.pc.in FORCE
	@mkdir -p $(dir $@)
	$(Q)sed -e 's|@PREFIX@|$(CURDIR)|' -e 's|@LIBDIR@|$(abspath $(BUILD))|' \
		-e 's|@INCLUDEDIR@|$(CURDIR)/include|' -e 's|@VERSION@|$(VERSION)|' \
		-e 's|@PKGS@|$(subst $() ,$(PY_COMMA) ,$(strip $(PKGS)))|' \
		$< >$@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi

$(PY_EXT): $(PY_DEPS) $(LIB_A)
	@$(if $(Q),echo "  PYEXT   $@")
	$(Q)cd python && XFER_WERROR=$(WERROR) XFER_PC_DIR=$(abspath $(dir $(PY_PC))) \
		XFER_LIBXFER=$(abspath $(LIB_A)) $(PYTHON) setup.py -q \
		build_ext --inplace --force --build-temp $(PY_TMP)/tmp \
		--build-lib $(PY_TMP)/lib $(if $(Q),>/dev/null)

# Two-process transfers, asyncio, threads, hostile arguments, interop with
# xfer-bench, xfer-metad and redis, reference counts, and a pip install of
# both packages into a venv where a program written for Mooncake runs
# unmodified.
test-python: $(PY_EXT) $(BENCH) $(METAD) $(STORED)
	@echo "== pytest python/tests"
	@cd python && XFER_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q \
		-p no:cacheprovider tests

# The module's argument handling under hostile calls from two threads
# (python/tests/test_fuzz_args.py, also a 10 s part of test-python), for
# FUZZ_SECONDS (mk/fuzz.mk); make fuzz runs it with the libFuzzer targets.
fuzz-python: $(PY_EXT)
	@echo "== fuzz python/tests/test_fuzz_args.py ($(FUZZ_SECONDS) s)"
	@cd python && XFER_FUZZ_SECONDS=$(FUZZ_SECONDS) $(PYTHON) -m pytest \
		-q -p no:cacheprovider tests/test_fuzz_args.py
fuzz: fuzz-python

clean: python-clean
python-clean:
	rm -rf python/xfer/_xfer*.so python/build python/*.egg-info \
		python/mooncake-compat/build python/mooncake-compat/*.egg-info

.PHONY: python python-lib test-python python-clean fuzz-python FORCE
FORCE:
