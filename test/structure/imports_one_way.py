"""Checks that the framework bindings' modules import each other one way: no circle among the
imports a module runs when it loads (its module-level `import` and `from ... import`
statements). `from package import module` counts as an import of that module, `from module
import name` of the module; an import inside a function runs later and is not counted. On a
circle it prints the modules and the imports that tie them.

    python3 imports_one_way.py ROOT...    (each ROOT a folder that holds top-level packages)
"""
import ast
import os
import sys

from circles import circles


def modules(roots):
    """{dotted name: path} of every module under the roots."""
    found = {}
    for root in roots:
        for folder, _, files in os.walk(root):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(folder, f)
                    name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                    found[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return found


def imports(name, path, mods):
    """The project modules that module name imports when it loads."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    wanted = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            wanted += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            wanted += [base + "." + a.name if base + "." + a.name in mods else base
                       for a in node.names]
    got = set()
    for w in wanted:
        while w and w not in mods:  # a name inside a module: the module
            w = w.rpartition(".")[0]
        if w and w != name:
            got.add(w)
    return got


def main():
    mods = modules(sys.argv[1:])
    graph = {name: imports(name, path, mods) for name, path in mods.items()}
    found = circles(graph)
    for comp in found:
        print("a circle of imports among %d modules:" % len(comp))
        for a in comp:
            print("  %s imports %s" % (a, ", ".join(sorted(b for b in graph[a] if b in comp))))
    print("%d modules, %d imports between them at load, %d circle(s)"
          % (len(mods), sum(len(v) for v in graph.values()), len(found)))
    if found:
        sys.exit("FAIL: a circle of imports")


if __name__ == "__main__":
    main()
