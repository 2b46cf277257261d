"""Every import of a tree of packages, read with ast (lazy ones inside functions included) and
resolved to absolute module names: `from ..handlers import STATE` in gateway/console/routes.py
is an import of gateway.handlers. The layers tests read the repo with it, and their self-tests
a planted tree of their own."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    path: str  # the importing file, relative to the root
    module: str  # its dotted module name
    target: str  # the module after `import` or `from`, absolute
    names: tuple[str, ...]  # what `from target import ...` takes; () for `import target`
    line: int

    @property
    def package(self) -> str:
        return self.module.split(".")[0]

    @property
    def target_package(self) -> str:
        return self.target.split(".")[0]

    def reaches(self) -> set[str]:
        """The modules this import may load: the target, and target.name for each name taken
        (`from gateway import handlers` loads gateway.handlers)."""
        return {self.target, *(f"{self.target}.{name}" for name in self.names if name != "*")}


def packages(root: Path) -> set[str]:
    """Our top-level packages: the folders of the root with an __init__.py."""
    return {p.parent.name for p in root.glob("*/__init__.py")}


def module_name(relative: Path) -> str:
    parts = list(relative.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    here = module.split(".") if is_package else module.split(".")[:-1]
    base = here[:len(here) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_in(root: Path, path: Path) -> list[Import]:
    relative = path.relative_to(root)
    module, is_package = module_name(relative), path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(str(relative), module, alias.name, (), node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, module, is_package)
            found.append(Import(str(relative), module, target, tuple(a.name for a in node.names), node.lineno))
    return found


def all_imports(root: Path) -> list[Import]:
    """Every import in every module of our packages, in path order."""
    found = []
    for package in sorted(packages(root)):
        for path in sorted((root / package).rglob("*.py")):
            found += imports_in(root, path)
    return found


def is_module(root: Path, dotted: str) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
