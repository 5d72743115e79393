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

from circles import circles


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
