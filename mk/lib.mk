# The lowest floor, util/ and reactor/: what every program of the tree
# links (the library, xfer-metad), as an archive of its own.
UTIL_SRCS := $(wildcard util/*.c reactor/*.c)
UTIL_OBJS := $(UTIL_SRCS:%.c=$(BUILD)/%.o)
UTIL_A    := $(BUILD)/libxfer-util.a

$(UTIL_A): $(UTIL_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# libxfer: static and shared (versioned soname), the floor included, and
# on top the store's client (store/client/, with the codec and allocator
# it shares with the master: include/xfer/store.h);
# each optional part's files only when it is in (mk/config.mk), and the
# file segments' public calls answering -EPROTONOSUPPORT when it is not.
PART_SRCS_RDMA  := $(wildcard transports/rdma/*.c)
PART_SRCS_FILE  := $(wildcard transports/file/*.c)
PART_SRCS_REDIS := $(wildcard metadata/redis*.c)
PART_SRCS_ETCD  := $(wildcard metadata/etcd*.c)
PART_SRCS_OUT   := $(foreach p,RDMA FILE REDIS ETCD,$(if $(filter $(p),\
	$(PARTS)),,$(PART_SRCS_$(p)))) \
	$(if $(filter FILE,$(PARTS)),transports/nofile.c)
LIB_SRCS := $(UTIL_SRCS) $(filter-out $(PART_SRCS_OUT),$(wildcard \
	core/*.c transports/*.c transports/*/*.c metadata/*.c)) \
	$(wildcard store/*.c store/client/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
LIB_A    := $(BUILD)/libxfer.a
LIB_SO   := $(BUILD)/libxfer.so.$(VERSION)
SONAME   := libxfer.so.$(VERSION_MAJOR)

all: $(LIB_A) $(LIB_SO)

$(LIB_A): $(LIB_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(LIB_OBJS)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)
	$(Q)ln -sf libxfer.so.$(VERSION) $(BUILD)/$(SONAME)
	$(Q)ln -sf $(SONAME) $(BUILD)/libxfer.so
