"""The import layers hold: every module's imports (parsed with ast, lazy ones included) point
only along the allowed arrows. gateway -> classifier, policies, wire; backends -> kernels,
wire; nothing ever back up. launcher may import anything, and only entry points import it."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
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
# Arrows that break the layers today and belong to work in progress elsewhere; each names why.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


def ours() -> set[str]:
    return {p.parent.name for p in ROOT.glob("*/__init__.py")}


def imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports in one module (relative ones stay in its package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def arrows() -> list[tuple[str, str, str]]:
    """(module path, its package, imported package of ours) for every cross-package import."""
    packages, out = ours(), []
    for package in sorted(packages):
        for path in sorted((ROOT / package).rglob("*.py")):
            for target in sorted(imports(path) & packages - {package}):
                out.append((str(path.relative_to(ROOT)), package, target))
    return out


def test_every_package_has_a_rule():
    assert ours() <= set(ALLOWED), f"give these packages a layer rule: {sorted(ours() - set(ALLOWED))}"


def test_imports_follow_the_layers():
    bad = [f"{path}: {package} -> {target}" for path, package, target in arrows()
           if target not in ALLOWED[package] and (path, target) not in KNOWN_EXCEPTIONS]
    assert bad == [], "imports outside the allowed layers:\n" + "\n".join(bad)


def test_only_entry_points_import_the_launcher():
    entry = {"launcher", "benchmarks", "tests"}
    bad = [path for path, package, target in arrows()
           if target == "launcher" and package not in entry and not path.endswith("__main__.py")]
    assert bad == []


def test_known_exceptions_are_still_needed():
    """An exception that no longer happens is removed from the list, so the list stays true."""
    gone = [(path, target) for path, target in KNOWN_EXCEPTIONS
            if not (ROOT / path).exists() or target not in imports(ROOT / path)]
    assert gone == []


def test_wire_imports_no_web_framework():
    """Pure modules (policies, the wire formats) import without the web stack."""
    code = ("import sys, importlib, pkgutil, wire, policies.decision\n"
            "[importlib.import_module('wire.' + m.name) for m in pkgutil.iter_modules(wire.__path__)]\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'webwire')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_check_sees_a_violation(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os\nfrom gateway.config import load_config\n\ndef f():\n    import backends.worker\n")
    assert imports(module) == {"os", "gateway", "backends"}
