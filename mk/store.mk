# The store (store/): the master and its bench are built here; the
# client is libxfer's (mk/lib.mk).
#   store/*.c                 what the master and the clients share
#   store/client/*.c          the client (include/xfer/store.h)
#   store/master/*.c          xfer-stored, the master: the floor
#                             (libxfer-util.a), store/*.c, xfer-metad's
#                             objects and SQLite (its journal), no libxfer
#   bench/store/alloc_bench.c xfer-store-alloc-bench: the allocator alone
#   bench/store/store_bench.c xfer-store-bench: the client, two processes
#   bench/store/master_bench.c xfer-store-master-bench: the master alone,
#                             driven over its RPC
#   bench/store/stripe_bench.c xfer-store-stripe-bench: a striped object's
#                             get and put against a whole one's
#   bench/store/flush_bench.c xfer-store-flush-bench: puts flushed to a
#                             folder (the slower tier)
STORE_SRCS := $(wildcard store/*.c)
STORE_OBJS := $(STORE_SRCS:%.c=$(BUILD)/%.o)
# --enable_ha (store/master/ha.c) elects on the etcd backend, linked as
# libxfer has it: only with WITH_ETCD
STORED_SRCS := $(filter-out $(if $(filter ETCD,$(PARTS)),,store/master/ha.c),\
	$(wildcard store/master/*.c))
STORED_OBJS := $(STORED_SRCS:%.c=$(BUILD)/%.o)
STORED_ETCD_OBJS := $(if $(filter ETCD,$(PARTS)),\
	$(patsubst %.c,$(BUILD)/%.o,$(wildcard metadata/etcd*.c)) \
	$(BUILD)/core/deferred.o $(BUILD)/metadata/resolve.o)
STORED := $(BUILD)/xfer-stored
STORE_ALLOC_BENCH := $(BUILD)/xfer-store-alloc-bench
STORE_BENCH := $(BUILD)/xfer-store-bench
STORE_MASTER_BENCH := $(BUILD)/xfer-store-master-bench
STORE_STRIPE_BENCH := $(BUILD)/xfer-store-stripe-bench
STORE_FLUSH_BENCH := $(BUILD)/xfer-store-flush-bench

all: $(STORED) $(STORE_ALLOC_BENCH) $(STORE_BENCH) $(STORE_MASTER_BENCH) \
	$(STORE_FLUSH_BENCH) $(STORE_STRIPE_BENCH)

$(BUILD)/store/master/journal.o: CFLAGS += $(shell pkg-config --cflags sqlite3)

# --enable_http_metadata_server: xfer-metad's store and HTTP server, its
# objects linked as they are (mk/metad.mk), all but its main()
STORED_METAD_OBJS := $(filter-out $(BUILD)/metadata/metad/main.o,$(METAD_OBJS))

$(STORED): $(STORED_OBJS) $(STORE_OBJS) $(STORED_METAD_OBJS) \
	   $(STORED_ETCD_OBJS) $(UTIL_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs sqlite3)

$(STORE_ALLOC_BENCH): $(BUILD)/bench/store/alloc_bench.o \
		      $(BUILD)/store/alloc.o
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the client between two processes, against the engine alone (it runs
# xfer-stored beside it)
$(STORE_BENCH): $(BUILD)/bench/store/store_bench.o \
		$(BUILD)/bench/store/stored_run.o $(LIB_A) | $(STORED)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter-out $(LIB_A),$^) $(LIB_A) \
		$(LDLIBS)

$(STORE_STRIPE_BENCH): $(BUILD)/bench/store/stripe_bench.o \
		       $(BUILD)/bench/store/stored_run.o $(LIB_A) | $(STORED)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter-out $(LIB_A),$^) $(LIB_A) \
		$(LDLIBS)

$(STORE_FLUSH_BENCH): $(BUILD)/bench/store/flush_bench.o $(LIB_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter-out $(LIB_A),$^) $(LIB_A) \
		$(LDLIBS)

$(STORE_MASTER_BENCH): $(BUILD)/bench/store/master_bench.o \
		       $(BUILD)/store/proto.o
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# test/unit_store_*.c test the shared parts; test/it_store*.c run the
# master (and link the codec to speak to it); test/th_store.c (the store
# client's tests' helpers) goes with all of them (mk/test.mk), and
# test/th_master.c (a client of the master's RPC) with the master's.
$(BUILD)/test/unit_store_alloc: $(BUILD)/store/alloc.o $(BUILD)/store/proto.o
$(BUILD)/test/unit_store_proto: $(BUILD)/store/proto.o
$(patsubst test/%.c,$(BUILD)/test/%,$(wildcard test/it_store*.c)): \
	$(BUILD)/store/proto.o | $(STORED)
# test/it_meta.c runs xfer-stored as one of its metadata servers.
$(BUILD)/test/it_meta: | $(STORED)
test-integration: $(STORED)
$(patsubst %,$(BUILD)/test/%,it_store_master it_store_persist \
	it_store_admin it_store_upsert it_store_tier it_store_repl_rpc \
	it_store_stripe): \
	$(BUILD)/test/th_master.o
$(BUILD)/test/it_store_upsert: TEST_LIBS += $(shell pkg-config --libs sqlite3)
# test/it_etcd_store_ha.c: masters electing on etcd (th_etcd.o, by its
# name) with the store's clients (th_store.o)
$(BUILD)/test/it_etcd_store_ha: $(BUILD)/test/th_store.o \
	$(BUILD)/store/proto.o | $(STORED)
