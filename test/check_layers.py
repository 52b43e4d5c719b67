#!/usr/bin/env python3
"""The library's object files call each other one way only: fails on a
cycle of calls between files (an object using a symbol defined in another
that, directly or through others, uses one of the first). Calls through
ops tables and callbacks are not seen, and are how a lower layer reaches
a higher one.
    test/check_layers.py build/core/*.o build/transports/tcp/*.o ...
"""
import subprocess
import sys


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


def main(objs):
    syms = {o: symbols(o) for o in objs}
    owner = {s: o for o, (_, d) in syms.items() for s in d}
    graph = {o: {owner[s] for s in used if owner.get(s, o) != o}
             for o, (used, _) in syms.items()}
    bad = cycles(graph)
    for comp in bad:
        print("call cycle between:", " ".join(comp))
    if not bad:
        print("layers: %d objects, no call cycle" % len(objs))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
