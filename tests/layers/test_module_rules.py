"""Rules below the package level, read from every import (lazy and relative ones included):
gateway/console and gateway/quality never import gateway.api.handlers or gateway.app; only
gateway.app and gateway.process import the process state (gateway.state); backends/engine
never imports the rest of backends; no module takes another's private name, nor reads another's
private attribute; no test module imports another; every import of ours names a module that
exists; and no modules import each other in a circle, however late or only for type checking."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.layers.attributes import private_attribute_violations
from tests.layers.imports import all_imports, packages
from tests.layers.rules import (circle_violations, cross_test_violations, inner_violations, owner_violations,
                                private_violations, unresolved)

ROOT = Path(__file__).parents[2]
# (importing file, imported module) -> why the arrow stands today. Each is work in progress
# elsewhere; an exception that no longer happens must leave this list.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _checked(violations) -> list[str]:
    return [str(v) for v in violations if (v.path, v.target) not in KNOWN_EXCEPTIONS]


def _found():
    return all_imports(ROOT)


def test_parts_of_a_package_follow_its_inner_rules():
    bad = _checked(inner_violations(_found()))
    assert bad == [], "imports against a package's inner rules:\n" + "\n".join(bad)


def test_only_the_app_and_the_process_import_the_process_state():
    bad = _checked(owner_violations(_found()))
    assert bad == [], "hand these the request's Services snapshot (request[SERVICES]) instead:\n" + "\n".join(bad)


def test_no_module_imports_another_modules_private_names():
    bad = _checked(private_violations(_found(), packages(ROOT)))
    assert bad == [], "give these names a public one, or keep them where they are used:\n" + "\n".join(bad)


def test_no_test_module_imports_another():
    bad = _checked(cross_test_violations(_found()))
    assert bad == [], "move what these share into a helper (tests/support when shared across folders):\n" \
        + "\n".join(bad)


def test_every_import_of_ours_names_a_module():
    bad = _checked(unresolved(_found(), packages(ROOT), ROOT))
    assert bad == [], "\n".join(bad)


def test_no_modules_import_each_other_in_a_circle():
    bad = _checked(circle_violations(_found(), ROOT))
    assert bad == [], "break these circles by ownership: move what both sides need to the module that owns " \
        "it, or to a new leaf module (an import inside a function or under TYPE_CHECKING still counts):\n" \
        + "\n".join(bad)


def test_no_module_reads_another_modules_private_attributes():
    bad = _checked(private_attribute_violations(ROOT))
    assert bad == [], "give these a public name, or do the work in the module that owns them:\n" + "\n".join(bad)


def test_known_exceptions_are_still_needed():
    """An exception that no longer happens is removed from the list, so the list stays true."""
    found, ours = _found(), packages(ROOT)
    standing = {(v.path, v.target) for v in [*inner_violations(found), *owner_violations(found),
                                              *private_violations(found, ours),
                                              *cross_test_violations(found), *unresolved(found, ours, ROOT),
                                              *circle_violations(found, ROOT), *private_attribute_violations(ROOT)]}
    assert set(KNOWN_EXCEPTIONS) - standing == set()


PLANTED = {  # file -> one bad arrow of each kind
    "gateway/console/widget.py": "from ..api.handlers import STATE\n",  # relative, against an inner rule
    "gateway/quality/score.py": "def f():\n    from gateway import app\n",  # lazy, against an inner rule
    "backends/engine/step.py": "from backends.worker import build_parser\n",
    "backends/engine/runner.py": "from .sampler import _draw\n",  # private, across modules
    "tests/kernels/test_b.py": "from ..backends.test_a import prompts\n",  # test to test
    "tests/gateway/helper.py": "from tests.gateway.conftest import gateway\n",  # a conftest is a test module
    "gateway/gone.py": "from gateway.no_such_module import x\n",
    "gateway/batches/reader.py": "def f():\n    from ..state import STATE\n",  # lazy, the process state
}
CLEAN = {  # arrows the same rules allow
    "gateway/console/page.py": "from ..core.metrics import METRICS\nfrom . import widget\n",
    "backends/engine/sampler.py": "from .config import EngineConfig\nfrom backends.engine import runner\n",
    "backends/worker.py": "from backends.engine import step\nfrom .engine.sampler import sample\n",
    "tests/kernels/test_c.py": "from tests.backends.models import tiny\nfrom .helpers import build\n",
}


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path in list(root.rglob("*.py")):  # every folder below the root is a package
        for folder in path.relative_to(root).parents:
            if folder != Path("."):
                (root / folder / "__init__.py").touch()
    return root


@pytest.fixture
def planted(tmp_path):
    return plant(tmp_path, {**PLANTED, **CLEAN, "gateway/core/metrics.py": "", "gateway/api/handlers.py": "",
                            "gateway/app.py": "", "backends/engine/config.py": "", "tests/backends/test_a.py": "",
                            "tests/backends/models.py": "", "tests/kernels/helpers.py": "",
                            "tests/gateway/conftest.py": "", "gateway/state.py": "",
                            "gateway/process.py": "from .state import STATE\n"})


def test_the_checks_reject_a_planted_bad_arrow_of_each_kind(planted):
    found, ours = all_imports(planted), packages(planted)
    rejected = {str(v).split(":")[0]: v.why for v in [*inner_violations(found), *owner_violations(found),
                                                     *private_violations(found, ours),
                                                     *cross_test_violations(found), *unresolved(found, ours, planted)]}
    assert rejected == {
        "gateway/console/widget.py": "gateway.console never imports gateway.api.handlers",
        "gateway/batches/reader.py": "only gateway.app, gateway.process import gateway.state",
        "gateway/quality/score.py": "gateway.quality never imports gateway.app",
        "backends/engine/step.py": "backends.engine never imports backends",
        "backends/engine/runner.py": "takes the private _draw",
        "tests/kernels/test_b.py": "tests share helper modules, never test modules",
        "tests/gateway/helper.py": "tests share helper modules, never test modules",
        "gateway/gone.py": "no such module",
    }


def test_the_circle_check_finds_a_planted_circle(tmp_path):
    """Three modules in a circle held apart by a late import and a TYPE_CHECKING one are still a
    circle; a package that imports its submodule, which takes a sibling from the package, is not."""
    plant(tmp_path, {
        "backends/engine/loader.py": "from .layers import Int4\n",
        "backends/engine/layers.py": "def fuse():\n    from .fusion import fuse\n",
        "backends/engine/fusion.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .loader import load\n",
        "policies/__init__.py": "from policies.service import Service\n",
        "policies/service.py": "from policies import metrics\n",
        "policies/metrics.py": "",
    })
    assert [str(v) for v in circle_violations(all_imports(tmp_path), tmp_path)] == [
        "backends/engine/fusion.py:4: -> backends.engine.loader (a circle of 3 modules: backends.engine.fusion "
        "-> backends.engine.loader -> backends.engine.layers -> backends.engine.fusion)"]


def test_the_attribute_check_finds_planted_private_reads(tmp_path):
    plant(tmp_path, {
        "backends/engine/runner.py": "class Runner:\n    def __init__(self):\n        self._meta = 1\n\n"
                                     "    def _step(self):\n        return self._meta\n",
        "backends/engine/graphs.py": "class Graphs:\n    def run(self, runner):\n        return runner._meta\n",
        "classifier/features.py": "_CUES = {}\n",
        "tests/test_f.py": "from classifier import features\n\n\ndef test_f():\n    assert features._CUES == {}\n",
        # allowed: a subclass's own object, a class reading its own kind, a private only torch defines,
        # and a top-level private of another module read off an object, not the module
        "backends/engine/sub.py": "from .runner import Runner\n\n\nclass Sub(Runner):\n"
                                  "    def step(self):\n        return self._meta + super()._step()\n",
        "backends/engine/point.py": "class Point:\n    def __init__(self, x):\n        self._x = x\n\n"
                                    "    def __eq__(self, other):\n        return self._x == other._x\n",
        "backends/engine/load.py": "def params(module):\n    return module._parameters\n",
        "launcher/sink.py": "def _value(v):\n    return v\n",
        "tests/test_m.py": "def test_m(metric):\n    assert metric.labels()._value\n",
    })
    assert [(v.path, v.line, v.target) for v in private_attribute_violations(tmp_path)] == [
        ("backends/engine/graphs.py", 3, "runner._meta"), ("tests/test_f.py", 5, "features._CUES")]
