"""The import layers hold: every module's imports (parsed with ast, lazy and relative ones
included) point only along the allowed arrows (tests/layers/rules.py: ALLOWED). gateway ->
classifier, policies, wire; backends -> kernels, wire; nothing ever back up. launcher may import
anything, and only entry points import it. Rules inside packages: test_module_rules.py."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.layers.imports import all_imports, imports_in, packages
from tests.layers.rules import ALLOWED, launcher_violations, layer_violations

ROOT = Path(__file__).parents[2]


def test_every_package_has_a_rule():
    assert packages(ROOT) <= set(ALLOWED), f"give these packages a layer rule: {sorted(packages(ROOT) - set(ALLOWED))}"


def test_imports_follow_the_layers():
    bad = layer_violations(all_imports(ROOT), packages(ROOT))
    assert bad == [], "imports outside the allowed layers:\n" + "\n".join(map(str, bad))


def test_only_entry_points_import_the_launcher():
    bad = launcher_violations(all_imports(ROOT), packages(ROOT))
    assert bad == [], "\n".join(map(str, bad))


def test_wire_imports_no_web_framework():
    """Pure modules (policies, the wire formats) import without the web stack."""
    code = ("import sys, importlib, pkgutil, wire, policies.decision\n"
            "[importlib.import_module('wire.' + m.name) for m in pkgutil.iter_modules(wire.__path__)]\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'webwire')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_check_reads_lazy_and_relative_imports(tmp_path):
    (tmp_path / "gateway" / "console").mkdir(parents=True)
    for init in ("gateway/__init__.py", "gateway/console/__init__.py"):
        (tmp_path / init).write_text("")
    module = tmp_path / "gateway" / "console" / "m.py"
    module.write_text("import os\nfrom gateway.config import load_config\nfrom ..handlers import STATE\n"
                      "from . import promtext\n\ndef f():\n    import backends.worker\n")
    found = {(i.target, i.names) for i in imports_in(tmp_path, module)}
    assert found == {("os", ()), ("gateway.config", ("load_config",)), ("gateway.handlers", ("STATE",)),
                     ("gateway.console", ("promtext",)), ("backends.worker", ())}


def test_the_check_rejects_an_arrow_against_the_layers(tmp_path):
    for name in ("gateway", "backends", "launcher"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "gateway" / "up.py").write_text("def f():\n    from backends.worker import main\n")
    (tmp_path / "backends" / "start.py").write_text("import launcher.processes\n")
    found, ours = all_imports(tmp_path), packages(tmp_path)
    assert [(v.path, v.target) for v in layer_violations(found, ours)] == [
        ("backends/start.py", "launcher.processes"), ("gateway/up.py", "backends.worker")]
    assert [v.path for v in launcher_violations(found, ours)] == ["backends/start.py"]
