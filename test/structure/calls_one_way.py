"""Checks that the object files of each static library call each other one way: no circle of
calls among them (a file that calls into another never takes, directly or through others, a call
back from it), the layering docs/architecture.md describes and a reader can follow top-down. The
calls are read from the archive with nm: file A calls file B when a global symbol A leaves
undefined is defined by B. On a circle it prints the files and the symbols that tie them.

    python3 calls_one_way.py NM ARCHIVE...
"""
import os
import subprocess
import sys


def members(nm, archive):
    """{member: (defined symbols, undefined symbols)} of one archive."""
    out = subprocess.run([nm, "-A", "-g", archive], capture_output=True, text=True, check=True)
    got = {}
    for line in out.stdout.splitlines():
        if not line.startswith(archive + ":"):
            continue
        member, _, fields = line[len(archive) + 1:].partition(":")
        fields = fields.split()
        if len(fields) < 2:
            continue
        defined, undefined = got.setdefault(member, (set(), set()))
        (undefined if fields[-2] == "U" else defined).add(fields[-1])
    return got


def edges(objs):
    """{caller: {callee: [symbols]}} between the members of one archive."""
    owner = {}
    for name, (defined, _) in objs.items():
        for sym in defined:
            owner[sym] = name
    out = {name: {} for name in objs}
    for name, (_, undefined) in objs.items():
        for sym in undefined:
            to = owner.get(sym)
            if to is not None and to != name:
                out[name].setdefault(to, []).append(sym)
    return out


def circles(graph):
    """The strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def main():
    nm, archives = sys.argv[1], sys.argv[2:]
    bad = 0
    for archive in archives:
        graph = edges(members(nm, archive))
        for comp in circles(graph):
            bad += 1
            print("%s: a circle of calls among %d files:" % (os.path.basename(archive), len(comp)))
            for a in comp:
                for b, syms in sorted(graph[a].items()):
                    if b in comp:
                        print("  %s -> %s: %s" % (a, b, " ".join(sorted(syms))))
        print("%s: %d files, %d pairs in which one calls the other, %s" % (
            os.path.basename(archive), len(graph), sum(len(v) for v in graph.values()),
            "no circle" if not circles(graph) else "circles above"))
    if bad:
        sys.exit("FAIL: %d circle(s) of calls" % bad)


if __name__ == "__main__":
    main()
