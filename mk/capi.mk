# libtransfer_engine: Mooncake's C API on libxfer, static and shared
# (versioned soname). The shared one needs libxfer.so and exports the
# calls of include/xfer/transfer_engine_c.h only; its RUNPATH $ORIGIN
# finds libxfer.so.1 beside it (the build tree, an installed prefix), so
# neither the linker nor the loader needs to be told where libxfer is.
CAPI_SRCS   := $(wildcard capi/*.c)
CAPI_OBJS   := $(CAPI_SRCS:%.c=$(BUILD)/%.o)
CAPI_A      := $(BUILD)/libtransfer_engine.a
CAPI_SO     := $(BUILD)/libtransfer_engine.so.$(VERSION)
CAPI_SONAME := libtransfer_engine.so.$(VERSION_MAJOR)

all: $(CAPI_A) $(CAPI_SO)

$(CAPI_A): $(CAPI_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(CAPI_SO): $(CAPI_OBJS) $(LIB_SO) mk/capi.mk
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,-soname,$(CAPI_SONAME) \
		-Wl,--enable-new-dtags,-rpath,'$$ORIGIN' -o $@ \
		$(CAPI_OBJS) -L$(BUILD) -lxfer -pthread
	$(Q)ln -sf libtransfer_engine.so.$(VERSION) $(BUILD)/$(CAPI_SONAME)
	$(Q)ln -sf $(CAPI_SONAME) $(BUILD)/libtransfer_engine.so

# Programs written against transfer_engine_c.h alone (test/capi_*.c), as
# a Mooncake user's are: only include/xfer/ on the include path, linked
# with the shared library and a RUNPATH to the build tree (libxfer.so.1
# is found by libtransfer_engine's own); capi_pair_static with the
# static ones.
CAPI_TEST_SRCS := $(wildcard test/capi_*.c)
CAPI_TEST_BINS := $(CAPI_TEST_SRCS:test/%.c=$(BUILD)/test/%)
CAPI_CFLAGS    := -O2 -g -std=gnu11 -Wall -Wextra -MMD -MP -pthread \
                  -Iinclude/xfer $(if $(filter 1,$(WERROR)),-Werror) \
                  $(SAN_FLAGS)

$(BUILD)/test/capi_%: test/capi_%.c $(CAPI_SO)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC+LD   $@")
	$(Q)$(CC) $(CAPI_CFLAGS) -o $@ $< -L$(BUILD) -ltransfer_engine \
		-Wl,--enable-new-dtags,-rpath,$(abspath $(BUILD))

$(BUILD)/test/capi_pair_static: test/capi_pair.c $(CAPI_A) $(LIB_A)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC+LD   $@")
	$(Q)$(CC) $(CAPI_CFLAGS) -o $@ $< $(CAPI_A) $(LIB_A) $(LDLIBS)
