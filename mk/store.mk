# The store (store/): its parts are built here, apart from libxfer.
#   store/*.c                 what the master and the clients share
#   bench/store/alloc_bench.c xfer-store-alloc-bench: the allocator alone
STORE_SRCS := $(wildcard store/*.c)
STORE_OBJS := $(STORE_SRCS:%.c=$(BUILD)/%.o)
STORE_ALLOC_BENCH := $(BUILD)/xfer-store-alloc-bench

all: $(STORE_ALLOC_BENCH)

$(STORE_ALLOC_BENCH): $(BUILD)/bench/store/alloc_bench.o \
		      $(BUILD)/store/alloc.o
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# test/unit_store_*.c test the shared parts.
$(BUILD)/test/unit_store_alloc: $(BUILD)/store/alloc.o
$(BUILD)/test/unit_store_proto: $(BUILD)/store/proto.o
