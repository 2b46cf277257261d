"""Rules below the package level, read from every import (lazy and relative ones included):
gateway/console and gateway/quality never import gateway.handlers or gateway.app; backends/engine
never imports the rest of backends; no module takes another's private name; no test module
imports another; and every import of ours names a module that exists."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.layers.imports import all_imports, packages
from tests.layers.rules import inner_violations, private_violations, cross_test_violations, unresolved

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


def test_known_exceptions_are_still_needed():
    """An exception that no longer happens is removed from the list, so the list stays true."""
    found, ours = _found(), packages(ROOT)
    standing = {(v.path, v.target) for v in [*inner_violations(found), *private_violations(found, ours),
                                              *cross_test_violations(found), *unresolved(found, ours, ROOT)]}
    assert set(KNOWN_EXCEPTIONS) - standing == set()


PLANTED = {  # file -> one bad arrow of each kind
    "gateway/console/widget.py": "from ..handlers import STATE\n",  # relative, against an inner rule
    "gateway/quality/score.py": "def f():\n    from gateway import app\n",  # lazy, against an inner rule
    "backends/engine/step.py": "from backends.worker import build_parser\n",
    "backends/engine/runner.py": "from .sampler import _draw\n",  # private, across modules
    "tests/kernels/test_b.py": "from ..backends.test_a import prompts\n",  # test to test
    "tests/gateway/helper.py": "from tests.gateway.conftest import gateway\n",  # a conftest is a test module
    "gateway/gone.py": "from gateway.no_such_module import x\n",
}
CLEAN = {  # arrows the same rules allow
    "gateway/console/page.py": "from ..metrics import METRICS\nfrom . import widget\n",
    "backends/engine/sampler.py": "from .config import EngineConfig\nfrom backends.engine import runner\n",
    "backends/worker.py": "from backends.engine import step\nfrom .engine.sampler import sample\n",
    "tests/kernels/test_c.py": "from tests.backends.models import tiny\nfrom .helpers import build\n",
}


@pytest.fixture
def planted(tmp_path):
    files = {**PLANTED, **CLEAN, "gateway/metrics.py": "", "gateway/handlers.py": "", "gateway/app.py": "",
             "backends/engine/config.py": "", "tests/backends/test_a.py": "", "tests/backends/models.py": "",
             "tests/kernels/helpers.py": "", "tests/gateway/conftest.py": ""}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path in list(tmp_path.rglob("*.py")):  # every folder below the root is a package
        for folder in path.relative_to(tmp_path).parents:
            if folder != Path("."):
                (tmp_path / folder / "__init__.py").touch()
    return tmp_path


def test_the_checks_reject_a_planted_bad_arrow_of_each_kind(planted):
    found, ours = all_imports(planted), packages(planted)
    rejected = {str(v).split(":")[0]: v.why for v in [*inner_violations(found), *private_violations(found, ours),
                                                     *cross_test_violations(found), *unresolved(found, ours, planted)]}
    assert rejected == {
        "gateway/console/widget.py": "gateway.console never imports gateway.handlers",
        "gateway/quality/score.py": "gateway.quality never imports gateway.app",
        "backends/engine/step.py": "backends.engine never imports backends",
        "backends/engine/runner.py": "takes the private _draw",
        "tests/kernels/test_b.py": "tests share helper modules, never test modules",
        "tests/gateway/helper.py": "tests share helper modules, never test modules",
        "gateway/gone.py": "no such module",
    }
