# The store (store/): the master and its bench are built here; the
# client is libxfer's (mk/lib.mk).
#   store/*.c                 what the master and the clients share
#   store/client/*.c          the client (include/xfer/store.h)
#   store/master/*.c          xfer-stored, the master: the floor
#                             (libxfer-util.a) and store/*.c, no libxfer
#   bench/store/alloc_bench.c xfer-store-alloc-bench: the allocator alone
#   bench/store/store_bench.c xfer-store-bench: the client, two processes
STORE_SRCS := $(wildcard store/*.c)
STORE_OBJS := $(STORE_SRCS:%.c=$(BUILD)/%.o)
STORED_SRCS := $(wildcard store/master/*.c)
STORED_OBJS := $(STORED_SRCS:%.c=$(BUILD)/%.o)
STORED := $(BUILD)/xfer-stored
STORE_ALLOC_BENCH := $(BUILD)/xfer-store-alloc-bench
STORE_BENCH := $(BUILD)/xfer-store-bench

all: $(STORED) $(STORE_ALLOC_BENCH) $(STORE_BENCH)

$(STORED): $(STORED_OBJS) $(STORE_OBJS) $(UTIL_A)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(STORE_ALLOC_BENCH): $(BUILD)/bench/store/alloc_bench.o \
		      $(BUILD)/store/alloc.o
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the client between two processes, against the engine alone (it runs
# xfer-stored beside it)
$(STORE_BENCH): $(BUILD)/bench/store/store_bench.o $(LIB_A) | $(STORED)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter-out $(LIB_A),$^) $(LIB_A) \
		$(LDLIBS)

# test/unit_store_*.c test the shared parts; test/it_store*.c run the
# master (and link the codec to speak to it).
$(BUILD)/test/unit_store_alloc: $(BUILD)/store/alloc.o
$(BUILD)/test/unit_store_proto: $(BUILD)/store/proto.o
$(patsubst test/%.c,$(BUILD)/test/%,$(wildcard test/it_store*.c)): \
	$(BUILD)/store/proto.o | $(STORED)
test-integration: $(STORED)
