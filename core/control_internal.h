/*
 * What the parts built on the engine (the store's client, store/client/)
 * use of it beyond the public API: its control reactor, whose base
 * carries their events and whose thread runs their callbacks as it runs
 * the engine's (the callback base of xfer.h), and the cluster secret
 * their own connections prove. Implemented in core/engine.c.
 */
#ifndef XFER_CONTROL_INTERNAL_H
#define XFER_CONTROL_INTERNAL_H

struct xfer_auth;
struct xfer_engine;
struct xfer_reactor;

/** The engine's control reactor; valid until xfer_engine_free(). */
struct xfer_reactor *xfer_engine_control(struct xfer_engine *e);

/** The engine's cluster secret (auth_secret), or NULL without one;
 *  valid until xfer_engine_free(). */
const struct xfer_auth *xfer_engine_auth(const struct xfer_engine *e);

#endif
