"""The shelf of compiled decode packages (engine/model/decode_packages.py): a package is built once per
key, even by starts that race, never left half-written, and named anew by any change of the weights."""
from __future__ import annotations

import os
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch
import torch._inductor

from backends.engine.model import decode_packages
from backends.engine.model.decode_packages import PackageShelf, merge_repeated_calls, source_digest, tensors_digest


MODEL = "e" * 64  # the digest of the model the packages serve


def writer(calls: list):
    def build(path: Path) -> None:
        calls.append(path)
        path.write_bytes(b"package")
    return build


def test_a_package_is_built_once_then_found(tmp_path):
    shelf, calls = PackageShelf(tmp_path), []
    first, built = shelf.get("a" * 64, MODEL, writer(calls))
    again, built_again = shelf.get("a" * 64, MODEL, writer(calls))
    assert (built, built_again, first == again, len(calls)) == (True, False, True, 1)
    assert first.read_bytes() == b"package"


def test_starts_that_race_build_it_once(tmp_path):
    shelf, calls = PackageShelf(tmp_path), []
    threads = [threading.Thread(target=shelf.get, args=("b" * 64, MODEL, writer(calls))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and shelf.path("b" * 64, MODEL).exists()


def test_a_failed_build_leaves_nothing_and_the_next_start_builds(tmp_path):
    shelf = PackageShelf(tmp_path)

    def fails(path: Path) -> None:
        path.write_bytes(b"half")
        raise RuntimeError("compiler died")

    with pytest.raises(RuntimeError, match="compiler died"):
        shelf.get("c" * 64, MODEL, fails)
    assert not shelf.path("c" * 64, MODEL).exists() and list(tmp_path.glob("*.pt2")) == []
    assert shelf.get("c" * 64, MODEL, writer([]))[1] is True


def test_only_a_models_most_recently_used_packages_stay_and_other_models_keep_theirs(tmp_path, monkeypatch):
    monkeypatch.setattr(decode_packages, "KEEP_PER_MODEL", 2)
    shelf = PackageShelf(tmp_path)
    other, _ = shelf.get("9" * 64, "f" * 64, writer([]))  # another model, used longest ago
    os.utime(other, (time.time() - 3600, time.time() - 3600))
    for age, key in enumerate(("1", "2")):  # "1" used before "2"
        os.utime(shelf.get(key * 64, MODEL, writer([]))[0], (time.time() - 60 + age, time.time() - 60 + age))
    shelf.get("3" * 64, MODEL, writer([]))
    assert sorted(p.name for p in tmp_path.glob("*.pt2")) == sorted(
        shelf.path(k * 64, m).name for k, m in (("2", MODEL), ("3", MODEL), ("9", "f" * 64)))


def test_a_package_unused_for_a_week_goes_whatever_its_model(tmp_path):
    shelf = PackageShelf(tmp_path)
    stale, _ = shelf.get("4" * 64, "f" * 64, writer([]))
    os.utime(stale, (time.time() - decode_packages.STALE_S - 60,) * 2)
    shelf.get("5" * 64, MODEL, writer([]))
    assert not stale.exists()


def packager(members: dict[str, bytes]):
    def build(path: Path) -> None:
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in members.items():
                archive.writestr(name, data)
    return build


def test_a_package_library_is_unpacked_once_and_opened_in_place(tmp_path):
    shelf = PackageShelf(tmp_path)
    package, _ = shelf.get("d" * 64, MODEL, packager({"data/model/step.so": b"code", "data/model/step.json": b"ops",
                                                 "data/other/weights": b"elsewhere"}))
    library = shelf.library(package)
    assert library.read_bytes() == b"code" and library.parent.parent == tmp_path
    assert sorted(p.name for p in library.parent.iterdir()) == ["step.json", "step.so"]
    library.write_bytes(b"kept")  # a second call finds the unpacked library and unpacks nothing
    assert shelf.library(package).read_bytes() == b"kept"


def test_a_package_without_exactly_one_library_is_refused_and_leaves_nothing(tmp_path):
    shelf = PackageShelf(tmp_path)
    for key, members in (("e", {"step.cpp": b""}), ("f", {"a.so": b"", "b.so": b""})):
        package, _ = shelf.get(key * 64, MODEL, packager(members))
        with pytest.raises(RuntimeError, match="shared libraries, not one"):
            shelf.library(package)
        assert not (tmp_path / package.stem).exists()


def test_a_pruned_package_takes_its_unpacked_library_along(tmp_path, monkeypatch):
    monkeypatch.setattr(decode_packages, "KEEP_PER_MODEL", 1)
    shelf = PackageShelf(tmp_path)
    old, _ = shelf.get("7" * 64, MODEL, packager({"x.so": b"old"}))
    shelf.library(old)
    os.utime(old, (1000, 1000))
    shelf.get("8" * 64, MODEL, packager({"x.so": b"new"}))
    assert not old.exists() and not (tmp_path / old.stem).exists()


def test_the_key_follows_every_weight_byte_and_the_sources():
    model = torch.nn.Linear(4, 4)
    before = tensors_digest(model)
    assert tensors_digest(model) == before
    with torch.no_grad():
        model.weight[0, 0] += 1
    assert tensors_digest(model) != before
    assert source_digest() == source_digest() and len(source_digest()) == 64


def test_the_key_follows_the_compile_options_and_the_torch_version(monkeypatch):
    before = decode_packages.environment()
    monkeypatch.setitem(decode_packages.INDUCTOR_OPTIONS, "freezing", False)
    assert decode_packages.environment() != before
    monkeypatch.undo()
    monkeypatch.setattr(torch, "__version__", "0.0.0")
    assert decode_packages.environment() != before


def test_a_build_leaves_the_options_of_the_key_as_they_were(monkeypatch, tmp_path):
    """Inductor adds its own settings to the options it is given: a second engine in the process
    would otherwise compute another key and build again."""
    def compile_and_package(program, package_path, inductor_configs):
        inductor_configs["aot_inductor.package"] = True

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compile_and_package)
    before = decode_packages.environment()
    decode_packages.compile_package(None, tmp_path / "step.pt2")
    assert decode_packages.environment() == before


class Twice(torch.nn.Module):
    def forward(self, x, w):
        return torch.mm(x, w) + torch.mm(x, w), torch.rand_like(x) + torch.rand_like(x)


def test_repeated_pure_calls_are_made_once_and_seeded_random_ones_stay():
    program = torch.export.export(Twice(), (torch.randn(2, 3), torch.randn(3, 3)), strict=False)
    module = program.graph_module

    def count(op):
        return sum(node.target == op for node in module.graph.nodes)

    assert count(torch.ops.aten.mm.default) == 2
    assert merge_repeated_calls(module) == 1
    assert count(torch.ops.aten.mm.default) == 1 and count(torch.ops.aten.rand_like.default) == 2
    x, w = torch.randn(2, 3), torch.randn(3, 3)
    torch.testing.assert_close(program.module()(x, w)[0], 2 * (x @ w))
