#!/usr/bin/env python3
"""The library's object files call each other one way only, and its
folders stand in floors. Fails on
- a cycle of calls between the library's files (an object using a
  symbol defined in another that, directly or through others, uses one
  of the first);
- a call up or across floors: util and reactor (the floor) use nothing
  above them nor each other; core uses only the floor; transports and
  metadata and the store's client use the core and the floor, never each
  other; capi, python and bench sit on top.
The one way down-to-up is data: the core reads the lists of what this
build has (LISTS), which the folders above supply, as libevent's event.c
reads eventops[]. Calls through ops tables and callbacks are not seen,
and are how a lower layer reaches a higher one.
    test/check_layers.py build/core/*.o build/transports/tcp/*.o ...
"""
import os
import subprocess
import sys

FLOORS = {"util": 0, "reactor": 0, "core": 1, "transports": 2,
          "metadata": 2, "store": 2, "capi": 3, "python": 3, "bench": 3}
LISTS = {"xfer_transport_list", "xfer_store_list"}


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True,
                         check=True).stdout
    used, defined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "U":
            used.add(f[1])
        elif len(f) == 3 and f[1] in "TDBRVW":
            defined.add(f[2])
    return used, defined


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def folder(obj):
    """The top-level folder of an object under the build directory."""
    parts = os.path.normpath(obj).split(os.sep)
    for p in parts:
        if p in FLOORS:
            return p
    sys.exit("check_layers: %s is in no known folder" % obj)


def upward(syms, owner):
    """(user, symbol, owner) for every use that breaks the floors."""
    found = []
    for o, (used, _) in syms.items():
        a = folder(o)
        for s in used:
            b = folder(owner[s]) if s in owner else a
            if a == b or s in LISTS or FLOORS[b] < FLOORS[a]:
                continue
            found.append((o, s, owner[s]))
    return sorted(found)


def main(objs):
    syms = {o: symbols(o) for o in objs}
    owner = {s: o for o, (_, d) in syms.items() for s in d}
    # The library's files: the programs on top are checked for floors only
    lib = {o for o in objs if FLOORS[folder(o)] < 3}
    graph = {o: {owner[s] for s in used if owner.get(s, o) not in (o, None)
                 and owner[s] in lib}
             for o, (used, _) in syms.items() if o in lib}
    bad = cycles(graph)
    for comp in bad:
        print("call cycle between:", " ".join(comp))
    up = upward(syms, owner)
    for o, s, d in up:
        print("floor broken: %s uses %s of %s" % (o, s, d))
    if not bad and not up:
        print("layers: %d objects in %d folders, no call cycle, no call "
              "up a floor" % (len(objs), len({folder(o) for o in objs})))
    return 1 if bad or up else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
