"""The import rules, each a function from the imports of a tree to its violations, so the tests
run them on the repo and on planted trees alike."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import networkx as nx

from tests.layers.imports import Import, is_module

# package -> our packages it may import (its own always allowed). webwire is the aiohttp binding
# of wire (error responses, JSON bodies) that both HTTP servers, gateway and backends, share.
# typedconfig is the config-field validator that gateway and policies share without importing each other.
ALLOWED = {
    "wire": set(),
    "typedconfig": set(),
    "kernels": set(),
    "classifier": set(),
    "policies": {"wire", "typedconfig"},
    "webwire": {"wire"},
    "gateway": {"classifier", "policies", "wire", "webwire", "typedconfig"},
    "backends": {"kernels", "wire", "webwire"},
    "dashboards": set(),
    "measure": {"backends"},
    "launcher": {"gateway", "backends", "classifier", "policies", "kernels", "wire", "webwire", "dashboards",
                 "measure", "typedconfig"},
    "benchmarks": {"gateway", "backends", "classifier", "policies", "kernels", "wire", "webwire", "dashboards",
                   "measure", "launcher", "typedconfig"},
    # tests never import benchmarks: shared helpers live in tests/support or launcher/
    "tests": {"gateway", "backends", "classifier", "policies", "kernels", "wire", "webwire", "dashboards",
              "measure", "launcher", "typedconfig"},
}
ENTRY_POINTS = {"launcher", "benchmarks", "tests"}  # the only importers of launcher, with any __main__.py

# Rules inside a package: (modules under this, must not import modules under this, except under this).
# The console and the quality monitor are parts the app mounts; they never reach back into the
# request path. The engine is a library the worker serves; it never imports the worker around it.
# Inside the engine, structured output and quantization stand alone, and the model knows a
# sequence but not the loop (core) that schedules it.
INNER = [
    ("gateway.console", "gateway.api.handlers", None),
    ("gateway.console", "gateway.app", None),
    ("gateway.quality", "gateway.api.handlers", None),
    ("gateway.quality", "gateway.app", None),
    ("backends.engine", "backends", "backends.engine"),
    ("backends.engine.structured", "backends.engine", "backends.engine.structured"),
    ("backends.engine.quant", "backends.engine", "backends.engine.quant"),
    ("backends.engine.model", "backends.engine.core", "backends.engine.core.sequence"),
    ("backends.engine.model", "backends.engine.speculative", None),
    ("backends.engine.model", "backends.engine.structured", None),
]


# module -> the only modules of its own package that may import it. The process state is the
# app's and the process's: every surface is handed the request's `Services` snapshot instead.
ONLY_IMPORTED_BY = {
    "gateway.state": {"gateway.app", "gateway.process"},
}


class Violation(NamedTuple):
    path: str
    line: int
    target: str  # the module imported against the rule
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: -> {self.target} ({self.why})"


def _violation(i: Import, target: str, why: str) -> Violation:
    return Violation(i.path, i.line, target, why)


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _ours(found: list[Import], packages: set[str]) -> list[Import]:
    return [i for i in found if i.target_package in packages]


def layer_violations(found: list[Import], packages: set[str]) -> list[Violation]:
    """Imports of another package of ours that its rule in ALLOWED does not list."""
    return [_violation(i, i.target, f"{i.package} may not import {i.target_package}") for i in _ours(found, packages)
            if i.target_package != i.package and i.target_package not in ALLOWED.get(i.package, set())]


def launcher_violations(found: list[Import], packages: set[str]) -> list[Violation]:
    return [_violation(i, i.target, "only entry points start the stack") for i in _ours(found, packages)
            if i.target_package == "launcher" and i.package not in ENTRY_POINTS | {"launcher"}
            and not i.path.endswith("__main__.py")]


def inner_violations(found: list[Import]) -> list[Violation]:
    bad = []
    for i in found:
        for area, banned, allowed in INNER:
            hits = sorted(m for m in i.reaches() if under(m, banned) and not (allowed and under(m, allowed)))
            if under(i.module, area) and hits:
                bad.append(_violation(i, hits[0], f"{area} never imports {banned}"))
    return bad


def owner_violations(found: list[Import]) -> list[Violation]:
    bad = []
    for i in found:
        for owned, importers in ONLY_IMPORTED_BY.items():
            package = owned.split(".")[0]
            if (under(i.module, package) and i.module not in importers | {owned}
                    and any(under(m, owned) for m in i.reaches())):
                bad.append(_violation(i, owned, f"only {', '.join(sorted(importers))} import {owned}"))
    return bad


def private_violations(found: list[Import], packages: set[str]) -> list[Violation]:
    """`from x import _y` or `import x._y` of our own modules: a private name is its module's alone."""
    bad = []
    for i in _ours(found, packages):
        private = [p for p in (*i.target.split(".")[1:], *i.names) if p.startswith("_") and not p.startswith("__")]
        if private:
            bad.append(_violation(i, i.target, f"takes the private {', '.join(private)}"))
    return bad


def is_test_module(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def cross_test_violations(found: list[Import]) -> list[Violation]:
    """A test module or conftest is loaded by pytest alone; what tests share is a helper module."""
    bad = []
    for i in found:
        hits = sorted(m for m in i.reaches() if under(m, "tests") and is_test_module(m) and m != i.module)
        if i.package == "tests" and hits:
            bad.append(_violation(i, hits[0], "tests share helper modules, never test modules"))
    return bad


def unresolved(found: list[Import], packages: set[str], root: Path) -> list[Violation]:
    """Imports of our packages that name no module (a moved file left an importer behind)."""
    return [_violation(i, i.target, "no such module") for i in _ours(found, packages) if not is_module(root, i.target)]


def loads(i: Import, root: Path) -> set[str]:
    """The modules of ours an import runs: `from pkg import mod` runs pkg.mod (pkg only as its
    parent, as every import of a submodule does), `from pkg import name` pkg itself."""
    submodules = {f"{i.target}.{name}" for name in i.names if is_module(root, f"{i.target}.{name}")}
    whole = len(submodules) < len(i.names) or not i.names
    return submodules | ({i.target} if whole and is_module(root, i.target) else set())


def import_graph(found: list[Import], root: Path) -> nx.DiGraph:
    """Module -> each module of ours it loads. Every import counts, wherever it stands: one inside
    a function or under `if TYPE_CHECKING:` still ties the two modules together."""
    graph = nx.DiGraph()
    for i in found:
        graph.add_node(i.module)
        for target in sorted(loads(i, root)):
            if target != i.module and not graph.has_edge(i.module, target):
                graph.add_edge(i.module, target, where=(i.path, i.line))
    return graph


def circle_violations(found: list[Import], root: Path) -> list[Violation]:
    """One violation per circle (a strongly connected set of modules), naming one loop through it."""
    graph, bad = import_graph(found, root), []
    for members in nx.strongly_connected_components(graph):
        if len(members) > 1:
            loop = nx.find_cycle(graph.subgraph(members), source=min(members))
            (path, line), target = graph.edges[loop[0]]["where"], loop[0][1]
            modules = [a for a, _ in loop] + [loop[0][0]]
            bad.append(Violation(path, line, target, f"a circle of {len(members)} modules: {' -> '.join(modules)}"))
    return sorted(bad)
