"""Private attributes read across modules, found with ast. `x._name` is its module's business:
another module reading or writing it (`self.runner._metadata`, `features._CUES`) reaches into
a part it should call through a public name.

The rule, by name since types are not known statically: in a module, `<expr>._name` (one
leading underscore) where <expr> is not `self`, `cls` or `super()`, `_name` is not defined in
that module, and another module of ours defines it: as a class member (a method, a class-level
name, a `self._name =`), or at its top level when <expr> is a name the module imported. A
private name that only other projects define (torch's `module._parameters`) is outside it."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from tests.layers.imports import packages
from tests.layers.rules import Violation


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name != "_"


@dataclass
class Defined:
    members: set[str] = field(default_factory=set)  # what `obj._name` can mean: class members
    top_level: set[str] = field(default_factory=set)  # what `module._name` can mean
    imported: set[str] = field(default_factory=set)  # names bound by this module's imports

    @property
    def all(self) -> set[str]:
        return self.members | self.top_level


def _bound(statement: ast.stmt) -> list[str]:
    """Names an assignment, a def or an import in a module or class body binds."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [statement.name]
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in statement.names]
    targets = statement.targets if isinstance(statement, ast.Assign) else \
        [statement.target] if isinstance(statement, (ast.AnnAssign, ast.AugAssign)) else []
    names = [n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)]
    if "__slots__" in names:
        names += [c.value for c in ast.walk(statement.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return names


def _is_own(node: ast.expr) -> bool:
    """`self`, `cls` or `super()`: the object whose class (or a subclass) defines the name."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def defined_in(tree: ast.Module) -> Defined:
    found = Defined()
    for statement in tree.body:
        found.top_level.update(_bound(statement))
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            found.imported.update(_bound(statement))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                found.members.update(_bound(statement))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _is_own(node.value):
            found.members.add(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):  # imports inside functions, too
            found.imported.update(_bound(node))
    return found


def modules(root: Path) -> dict[str, ast.Module]:
    """Every module of our packages, by path relative to the root."""
    return {str(path.relative_to(root)): ast.parse(path.read_text(), str(path))
            for package in sorted(packages(root)) for path in sorted((root / package).rglob("*.py"))}


def private_attribute_violations(root: Path) -> list[Violation]:
    trees = modules(root)
    defined = {path: defined_in(tree) for path, tree in trees.items()}
    bad = []
    for path, tree in trees.items():
        here = defined[path]
        others = [d for other, d in defined.items() if other != path]
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not is_private(node.attr) or _is_own(node.value) \
                    or node.attr in here.all:
                continue
            of_a_module = isinstance(node.value, ast.Name) and node.value.id in here.imported
            owners = [d for d in others if node.attr in d.members or (of_a_module and node.attr in d.top_level)]
            if owners:
                bad.append(Violation(path, node.lineno, ast.unparse(node), f"{node.attr} is another module's private"))
    return sorted(bad)
