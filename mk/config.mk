# Compiler flags and dependencies (from pkg-config).
BUILD   ?= build
CC      ?= cc
WERROR  ?= 1
PKGS    := libevent libevent_pthreads yajl hiredis libibverbs numa

VERSION_MAJOR := 0
VERSION       := 0.1.0

CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -Wall -Wextra -fPIC -pthread -MMD -MP \
           -I. -Iinclude -Icore -Ireactor -Itransports -Itransports/rdma -Imetadata \
           $(shell pkg-config --cflags $(PKGS))
ifeq ($(WERROR),1)
CFLAGS  += -Werror
endif
LDLIBS  += $(shell pkg-config --libs $(PKGS)) -pthread

ifeq ($(V),1)
Q :=
else
Q := @
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<
