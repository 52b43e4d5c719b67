# Compiler flags and dependencies (from pkg-config).
BUILD   ?= build
CC      ?= cc
WERROR  ?= 1

# Optional parts (libevent's backends, UCX's modules): yes, no, or auto
# (yes when pkg-config finds what the part needs). A part left out takes
# its folder out of the build and its entry out of the lists; XFER_HAVE_*
# says which are in. `make setup` installs everything, so the default
# build has all four.
WITH_RDMA  ?= auto
WITH_FILE  ?= auto
WITH_REDIS ?= auto
WITH_ETCD  ?= auto
part = $(if $(filter auto,$(1)),$(if $(2),$(shell pkg-config --exists $(2) \
	&& echo yes || echo no),yes),$(1))
HAVE_RDMA  := $(call part,$(WITH_RDMA),libibverbs numa)
HAVE_FILE  := $(call part,$(WITH_FILE),liburing)
HAVE_REDIS := $(call part,$(WITH_REDIS),hiredis)
HAVE_ETCD  := $(call part,$(WITH_ETCD),)
PARTS      := $(foreach p,RDMA FILE REDIS ETCD,$(if $(filter yes,\
	$(HAVE_$(p))),$(p)))

PKGS    := libevent libevent_pthreads yajl libcrypto \
           $(if $(filter RDMA,$(PARTS)),libibverbs numa) \
           $(if $(filter FILE,$(PARTS)),liburing) \
           $(if $(filter REDIS,$(PARTS)),hiredis)

VERSION_MAJOR := 1
VERSION       := 1.0.0

CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -Wall -Wextra -fPIC -pthread -MMD -MP \
           -fvisibility=hidden -I. -Iinclude \
           $(shell pkg-config --cflags $(PKGS)) $(PARTS:%=-DXFER_HAVE_%)
ifeq ($(WERROR),1)
CFLAGS  += -Werror
endif
LDLIBS  += $(shell pkg-config --libs $(PKGS)) -pthread
# Sanitizers, for compiling and linking alike (make test-asan sets them).
SAN_FLAGS ?=
CFLAGS  += $(SAN_FLAGS)
LDFLAGS += $(SAN_FLAGS)

ifeq ($(V),1)
Q :=
else
Q := @
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<
