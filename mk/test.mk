# cmocka tests: test/unit_*.c are unit tests, test/it_*.c integration tests
# over real sockets; examples/*.c build and run in the suite too;
# test/rdma/rt_*.c run on Soft-RoCE in rdmavm guests (test/rdma/run.sh);
# python/tests (pytest) are test-python's, in mk/python.mk.
# Tests of an optional part the build lacks (mk/config.mk) are left out,
# and each tier says which and why.
TEST_PART_RDMA  := unit_json_desc unit_json_rdma unit_topology unit_rdma_verbs
TEST_PART_FILE  := unit_file_remote unit_fio unit_json_file it_file%
TEST_PART_REDIS := it_redis_%
TEST_PART_ETCD  := it_etcd_%
TEST_OUT  := $(foreach p,RDMA FILE REDIS ETCD,$(if $(filter $(p),$(PARTS)),,\
	$(patsubst %,test/%.c,$(TEST_PART_$(p)))))
skipped = $(foreach p,RDMA FILE REDIS ETCD,$(if $(filter $(p),$(PARTS)),,\
	$(if $(filter $(patsubst %,test/%.c,$(TEST_PART_$(p))),$(1)),\
	echo "== skipped (built without WITH_$(p)):" $(patsubst test/%.c,%,\
	$(filter $(patsubst %,test/%.c,$(TEST_PART_$(p))),$(1)));)))
UNIT_ALL  := $(wildcard test/unit_*.c)
IT_ALL    := $(wildcard test/it_*.c)
UNIT_SRCS := $(filter-out $(TEST_OUT),$(UNIT_ALL))
IT_SRCS   := $(filter-out $(TEST_OUT),$(IT_ALL))
EX_SRCS   := $(wildcard examples/*.c)
UNIT_BINS := $(UNIT_SRCS:test/%.c=$(BUILD)/test/%)
IT_BINS   := $(IT_SRCS:test/%.c=$(BUILD)/test/%)
EX_BINS   := $(EX_SRCS:examples/%.c=$(BUILD)/examples/%)
RT_SRCS   := $(wildcard test/rdma/rt_*.c)
RT_BINS   := $(RT_SRCS:test/rdma/%.c=$(BUILD)/test/rdma/%)
TEST_LIBS := $(LDLIBS) $(shell pkg-config --libs cmocka)

# The tests set the engine's environment themselves: a cluster secret,
# knobs or a metadata server exported in the caller's shell stay out
# (XFER_TEST_* are the suite's own, as test-asan's XFER_TEST_ASAN).
unexport $(filter-out XFER_TEST_%,$(filter XFER_% MC_% MOONCAKE_%,\
	$(.VARIABLES)))

# The library last: a test/th_*.o added below may call it too.
$(BUILD)/test/%: $(BUILD)/test/%.o $(BUILD)/test/helpers.o $(LIB_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter-out $(LIB_A),$^) $(LIB_A) \
		$(TEST_LIBS)

# test/th_NAME.c holds what the programs test/{it,unit}_NAME.c and
# test/{it,unit}_NAME_*.c share; they link it too.
TH_NAMES  := $(patsubst test/th_%.c,%,$(wildcard test/th_*.c))
$(foreach n,$(TH_NAMES),$(foreach k,it unit,$(eval $(filter \
	$(BUILD)/test/$(k)_$(n) $(BUILD)/test/$(k)_$(n)_%,$(IT_BINS) \
	$(UNIT_BINS)): $(BUILD)/test/th_$(n).o)))

$(BUILD)/test/rdma/%: $(BUILD)/test/rdma/%.o $(BUILD)/test/rdma/rt.o \
		      $(BUILD)/test/helpers.o $(LIB_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter-out $(LIB_A),$^) $(LIB_A) \
		$(TEST_LIBS)
# the store's clients over RDMA use the store tests' helpers
$(BUILD)/test/rdma/rt_pair_store: $(BUILD)/test/th_store.o

$(BUILD)/examples/%: $(BUILD)/examples/%.o $(LIB_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Each program runs alone; the first failure stops the tier.
define run_each
	@set -e; for t in $(1); do echo "== $$t"; $$t; done
endef

# The shared library exports its API only; its files call each other one
# way only; docs/CONFIG.md and config.h list the keys the code has.
test-unit: $(UNIT_BINS) $(LIB_SO) $(CAPI_SO) $(BENCH)
	@sh test/check_exports.sh $(LIB_SO) XFER_EXPORT include/xfer/xfer.h \
		include/xfer/config.h include/xfer/event.h include/xfer/store.h \
		include/xfer/store_tasks.h include/xfer/store_segments.h
	@sh test/check_exports.sh $(CAPI_SO) XFER_TE_EXPORT \
		include/xfer/transfer_engine_c.h include/xfer/store_c.h
	@python3 test/check_layers.py $(LIB_OBJS) $(CAPI_OBJS) $(BENCH_OBJS)
	@$(call skipped,$(UNIT_ALL)) true
	$(if $(filter 4,$(words $(PARTS))),@sh mk/config_doc.sh --check \
		$(BENCH),@echo "== docs/CONFIG.md not checked: a part is left out")
	$(call run_each,$(UNIT_BINS))

# xfer-bench --plugin and --file: one second each way, checked and
# reported; the command lines of Mooncake's bench documentation; make
# install into a temporary DESTDIR and programs built against it
# (test/capi_*: mk/capi.mk). Under sanitizers (make test-asan) the
# install check is left out: the programs it builds outside the tree, as
# a user would, are not instrumented, and an instrumented libxfer.so
# needs them to be.
test-integration: $(IT_BINS) $(BENCH) $(CAPI_TEST_BINS) \
		  $(BUILD)/test/capi_pair_static
	@$(call skipped,$(IT_ALL)) true
	$(call run_each,$(IT_BINS) $(CAPI_TEST_BINS) \
		$(BUILD)/test/capi_pair_static)
	@sh test/check_bench_plugin.sh $(BENCH)
	@sh test/check_bench_file.sh $(BENCH)
	@sh test/check_bench_seeds.sh $(BENCH)
	$(if $(SAN_FLAGS),,@MAKE="$(MAKE)" sh test/check_install.sh $(BUILD))

test-examples: $(EX_BINS)
	$(call run_each,$(EX_BINS))

# Boots the guests; skips, saying why, where QEMU or rdmavm is missing.
# Then one more guest for the Python case (mk/python.mk).
test-rdma: $(RT_BINS) $(BENCH) $(CAPI_TEST_BINS) $(METAD) $(STORED) $(PY_EXT)
	@sh test/rdma/run.sh
	@PYTHON=$(PYTHON) sh python/tests/rdma.sh

test: test-unit test-integration test-examples test-python test-rdma

.PHONY: test test-unit test-integration test-examples test-rdma test-tcponly
.SECONDARY:

# The build with no optional part (mk/config.mk), in its own directory:
# its libxfer.so needs none of their libraries, and its unit tier passes.
TCPONLY := WITH_RDMA=no WITH_FILE=no WITH_REDIS=no WITH_ETCD=no
test-tcponly:
	$(MAKE) BUILD=$(BUILD)/tcponly $(TCPONLY) test-unit
	@if readelf -d $(BUILD)/tcponly/libxfer.so | \
		grep -E 'NEEDED.*(ibverbs|uring|numa|hiredis)'; then \
		echo "test-tcponly: libxfer.so needs an optional part"; \
		exit 1; fi
	@echo "test-tcponly: libxfer.so needs no optional part's library"
