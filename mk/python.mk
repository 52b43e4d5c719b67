# The Python package (python/): xfer._xfer, a C extension module, built in
# place against libxfer.a for the tests (make python); installed with
#   pip install --no-build-isolation ./python
# and python/mooncake-compat, the `mooncake` package (mooncake.engine) for
# programs written for Mooncake, installed beside it.
# PYTHON is Debian's interpreter, whose packages (python3-pytest) the
# tests use.
PYTHON  ?= $(firstword $(wildcard /usr/bin/python3) python3)
PY_DEPS := $(wildcard python/src/*.c python/src/*.h) python/setup.py
PY_EXT  := python/xfer/_xfer$(shell $(PYTHON) -c \
	'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' \
	2>/dev/null)
PY_TMP  := $(abspath $(BUILD))/python

python: $(PY_EXT)

$(PY_EXT): $(PY_DEPS) $(LIB_A)
	@$(if $(Q),echo "  PYEXT   $@")
	$(Q)cd python && XFER_WERROR=$(WERROR) XFER_PKGS="$(PKGS)" \
		XFER_LIBXFER=$(abspath $(LIB_A)) $(PYTHON) setup.py -q \
		build_ext --inplace --force --build-temp $(PY_TMP)/tmp \
		--build-lib $(PY_TMP)/lib $(if $(Q),>/dev/null)

# Two-process transfers, asyncio, interop with xfer-bench, xfer-metad and
# redis, reference counts, and a pip install of both packages into a venv
# where a program written for Mooncake runs unmodified.
test-python: $(PY_EXT) $(BENCH) $(METAD)
	@echo "== pytest python/tests"
	@cd python && XFER_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q \
		-p no:cacheprovider tests

clean: python-clean
python-clean:
	rm -rf python/xfer/_xfer*.so python/build python/*.egg-info \
		python/mooncake-compat/build python/mooncake-compat/*.egg-info

.PHONY: python test-python python-clean
