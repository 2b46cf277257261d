"""Compiled decode steps kept between starts as AOTInductor packages: a restart loads the compiled
code and its constants instead of compiling again.

torch.compile cannot skip a frozen graph's work on a restart: dynamo's trace, AOT autograd and
freezing run every time, and a graph holding a oneDNN-packed weight is never put in inductor's cache
(docs/engine-cpu.md). A package is the graph exported once (torch.export) and compiled ahead of time
into a shared library with its frozen constants; loading it is reading a file.

A package's name is a digest of everything that shapes its code: the sources of the engine and of
the kernels, the model's tensors after quantization (names, shapes, dtypes and bytes), the step's
shape bounds and pool, the inductor options, and the versions of Python, torch and transformers
and the CPU's vector unit. Any change names another package, so a stale one is never loaded.
Processes that want the same package take turns on an flock (released by the kernel if its holder
dies); the builder compiles in a scratch folder and moves the file in whole. The package's compiled
library (code and constants in one shared object) is unpacked beside it once, so later starts open
it in place instead of unpacking the package into a temporary folder each time.
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch._ops import OpOverload
import transformers
from torch import nn

log = logging.getLogger("tiergate.engine")
SOURCES = [Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[3] / "kernels"]
# a model's packages kept, most recently used first: both steps of this code version and of the last
# one; another model's packages (the tests' tiny models beside a worker's) never push them out
KEEP_PER_MODEL = 4
STALE_S = 7 * 24 * 3600  # a package of any model unused this long is removed
# freezing makes the weights constants, so sibling int4 projections merge into one kernel call; the
# constants stay inside the shared library, which is then all a start needs to open (PackageShelf.library)
INDUCTOR_OPTIONS = {"freezing": True, "aot_inductor.package_constants_in_so": True}


def source_digest() -> str:
    """The engine's and the kernels' sources (Python and C++), as one digest."""
    digest = hashlib.sha256()
    for root in SOURCES:
        for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".cpp", ".h") and p.is_file()):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def tensors_digest(model: nn.Module) -> str:
    """Every parameter and buffer of `model`: name, shape, dtype and bytes."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict(keep_vars=False).items()):
        tensor = tensor.detach()
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}\0".encode())
        if not tensor.is_meta:
            digest.update(tensor.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes()
                          if tensor.dtype != torch.bool else tensor.numpy().tobytes())
    return digest.hexdigest()


def environment() -> str:
    return repr((sys.version_info[:3], torch.__version__, transformers.__version__,
                 torch.backends.cpu.get_cpu_capability(), INDUCTOR_OPTIONS,
                 torch._inductor.config.cpp.weight_prepack))


@dataclass(frozen=True)
class StepShape:
    """The bounds one package serves: batch sizes and block-table widths, and the KV pool."""
    batch: tuple[int, int]  # (least, most) sequences; a batch of 1 is its own package
    width: tuple[int, int]  # (least, most) blocks per table
    pool: tuple  # (shape, dtype) of each layer's K and V tensors


class PackageShelf:
    """The folder of packages: finds one by its key, or builds it (one process at a time)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def path(self, key: str, model: str) -> Path:
        """`model`: a digest of the model the package serves, which groups its packages for pruning."""
        return self.folder / f"decode-{model[:12]}-{key[:24]}.pt2"

    def lock(self, path: Path):
        self.folder.mkdir(parents=True, exist_ok=True)
        return open(self.folder / f"{path.stem}.lock", "w")

    def get(self, key: str, model: str, build: Callable[[Path], None]) -> tuple[Path, bool]:
        """(the package's path, whether this call built it). `build(path)` writes a package at path."""
        path = self.path(key, model)
        built = False
        if not path.exists():
            with self.lock(path) as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not path.exists():  # else another process built it while this one waited
                    with tempfile.TemporaryDirectory(dir=self.folder) as scratch:
                        build(Path(scratch) / path.name)
                        os.replace(Path(scratch) / path.name, path)  # atomic: all of it or nothing
                    built = True
                    self._prune(keep=path, model=model)
        os.utime(path)  # most recently used: kept by _prune
        return path, built

    def library(self, package: Path) -> Path:
        """The package's shared library, unpacked once with the files beside it (the custom ops' call
        table) into a folder named after the package, moved in whole."""
        unpacked = self.folder / package.stem
        with zipfile.ZipFile(package) as archive:
            libraries = [n for n in archive.namelist() if n.endswith(".so")]
            if len(libraries) != 1:
                raise RuntimeError(f"{package} holds {len(libraries)} shared libraries, not one")
            beside = [n for n in archive.namelist() if n.rpartition("/")[0] == libraries[0].rpartition("/")[0]]
            if not unpacked.exists():
                with self.lock(package) as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                    if not unpacked.exists():
                        with tempfile.TemporaryDirectory(dir=self.folder) as scratch:
                            (Path(scratch) / package.stem).mkdir()
                            for name in beside:
                                with archive.open(name) as source, \
                                        open(Path(scratch) / package.stem / name.rpartition("/")[2], "wb") as target:
                                    shutil.copyfileobj(source, target, 1 << 24)
                            os.replace(Path(scratch) / package.stem, unpacked)
        return unpacked / libraries[0].rpartition("/")[2]

    def _prune(self, keep: Path, model: str) -> None:
        """Each change of code names new packages: the model's KEEP_PER_MODEL most recently used stay,
        and no package unused for STALE_S."""
        mine = sorted(self.folder.glob(f"decode-{model[:12]}-*.pt2"), key=lambda p: p.stat().st_mtime, reverse=True)
        stale = [p for p in self.folder.glob("decode-*.pt2") if time.time() - p.stat().st_mtime > STALE_S]
        for old in {*[p for p in mine if p != keep][KEEP_PER_MODEL - 1:], *stale} - {keep}:
            old.unlink(missing_ok=True)
            shutil.rmtree(self.folder / old.stem, ignore_errors=True)
            (self.folder / f"{old.stem}.lock").unlink(missing_ok=True)


class LoadedStep:
    """A package's compiled step (its unpacked library), called with the step's tensors and the KV pool
    (written in place)."""

    def __init__(self, library: Path, pool: list[tuple[torch.Tensor, torch.Tensor]]):
        self.runner = torch._C._aoti.AOTIModelContainerRunnerCpu(str(library), 1)
        self.pool = [t for pair in pool for t in pair]

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        # the flat list is the compiled step's argument layout: nothing is parsed per call
        return self.runner.run([*inputs, *self.pool])[0]


def export_step(step: nn.Module, example: tuple, shape: StepShape) -> torch.export.ExportedProgram:
    """step(input_ids, positions, slots, tables, lens, pool) exported with the batch and the table
    width dynamic within `shape`'s bounds (a batch of one is exported as it is)."""
    batch = shape.batch[0] if shape.batch[0] == shape.batch[1] else torch.export.Dim("batch", min=shape.batch[0],
                                                                                        max=shape.batch[1])
    width = torch.export.Dim("width", min=shape.width[0], max=shape.width[1])
    pool = [(None, None)] * len(example[5])
    dynamic = ({1: batch}, {1: batch}, {0: batch}, {0: batch, 1: width}, {0: batch}, pool)
    if isinstance(batch, int):
        dynamic = (None, None, None, {1: width}, None, pool)
    program = torch.export.export(step, example, dynamic_shapes=dynamic, strict=False)
    merge_repeated_calls(program.graph_module)
    return program


def merge_repeated_calls(module: torch.fx.GraphModule) -> int:
    """Calls of one pure op on the same arguments, made once: sibling int4 layers each ask for their
    stacked product (quant/quantize.py's FusedInt4) and take their slice. torch.compile's AOT autograd
    merges them; export leaves one call per layer. Returns the calls removed."""
    seen: dict = {}
    removed = 0
    for node in list(module.graph.nodes):
        target = node.target
        if node.op != "call_function" or not isinstance(target, OpOverload) \
                or target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
            continue
        key = (target, repr(node.args), repr(node.kwargs))
        if key in seen:
            node.replace_all_uses_with(seen[key])
            module.graph.erase_node(node)
            removed += 1
        else:
            seen[key] = node
    module.recompile()
    return removed


def compile_package(program: torch.export.ExportedProgram, path: Path) -> None:
    began = time.perf_counter()
    torch._inductor.aoti_compile_and_package(program, package_path=str(path),
                                          inductor_configs=dict(INDUCTOR_OPTIONS))  # a copy: inductor adds to it
    log.info("decode package compiled in %.1f s", time.perf_counter() - began)
