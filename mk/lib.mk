# libxfer: static and shared (versioned soname).
LIB_SRCS := $(wildcard core/*.c reactor/*.c transports/*.c transports/*/*.c \
                      metadata/*.c)
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
