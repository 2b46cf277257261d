"""Every repo path named in code, comments and docs exists: `gateway/core/relay.py`, `docs/batches.md`,
`python -m benchmarks.soak`. A name is read from where it stands: from the repo root, from the
naming file's folder or a folder above it, or, in tests/<package>/, from <package>/ (the tests
mirror it: `engine/quant/quantize.py` in tests/backends is backends/engine/quant/quantize.py)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]
SCANNED = ["*.py", "*.md", "*.toml", "*.yaml", "*.yml", "Makefile", ".ci/run"]
# a slash-separated name ending in a file extension, not inside a longer word, URL or path
PATH = re.compile(r"(?<![\w./:-])((?:[\w-]+/)+[\w.-]+\.(?:py|md|toml|ya?ml|jsonl?|cpp|h|lua|html|js|css|sh|onnx))\b")
MODULE = re.compile(r"python -m ([a-z_]\w*(?:\.\w+)*)")
# The layers checks' self-tests plant trees of made-up modules: their names exist only there.
NOT_SCANNED = {Path("tests/layers")}


def scanned_files() -> list[Path]:
    listed = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *SCANNED]
    out = subprocess.run(listed, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in out.split("\0")
            if name and (ROOT / name).is_file() and not NOT_SCANNED & set(Path(name).parents)]


def bases(named_in: Path) -> list[Path]:
    """Folders a name in this file may be relative to, nearest first."""
    rel = named_in.relative_to(ROOT)
    found = [ROOT / parent for parent in rel.parents]  # its own folder up to the root
    if rel.parts[0] == "tests" and len(rel.parts) > 2:
        found.append(ROOT / rel.parts[1])
    return found


def dead_paths(text: str, named_in: Path) -> list[str]:
    """Names in `text` whose first folder exists at one of the bases, but not the whole path."""
    dead = []
    for match in PATH.finditer(text):
        name = match.group(1)
        places = [base for base in bases(named_in) if (base / name.split("/")[0]).is_dir()]
        if places and not any((base / name).exists() for base in places):
            dead.append(name)
    return dead


def dead_modules(text: str, packages: set[str]) -> list[str]:
    """`python -m pkg.mod` of one of our packages that names no module."""
    dead = []
    for match in MODULE.finditer(text):
        module = match.group(1)
        if module.split(".")[0] not in packages:
            continue
        path = ROOT / module.replace(".", "/")
        if not (path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()):
            dead.append(module)
    return dead


def test_every_named_path_exists():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    dead = []
    for path in scanned_files():
        text = path.read_text(errors="replace")
        where = path.relative_to(ROOT)
        dead += [f"{where}: {name}" for name in dead_paths(text, path) + dead_modules(text, packages)]
    assert dead == [], "named paths that do not exist:\n" + "\n".join(dead)


def test_the_check_sees_a_dead_name():
    here = ROOT / "tests" / "backends" / "test_x.py"
    text = ("see gateway/core/relay.py and gateway/no_such_file.py; engine/quant/quantize.py is backends'; "
            "train/validation/test.jsonl is prose; https://example.com/gateway/x.py is a URL")
    assert dead_paths(text, here) == ["gateway/no_such_file.py"]
    assert dead_modules("python -m benchmarks.soak; python -m benchmarks.gone; python -m pip", {"benchmarks"}) \
        == ["benchmarks.gone"]
