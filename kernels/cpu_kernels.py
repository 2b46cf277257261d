"""Our C++ CPU kernels, as ops of `torch.ops.tiergate_<isa>` (`tiergate_avx512`, `tiergate_avx2`, ...):

- `paged_decode` (csrc/paged_decode_cpu.cpp): decode attention that reads K/V where they lie
  in the block pool;
- `int8_linear` (csrc/int8_linear_cpu.cpp): weight-only int8 linear for decode-sized inputs
  (the int8 LM head);
- `int4_linear` (csrc/int4_linear_cpu.cpp): group-wise int4 linear for decode-sized inputs.

Each is built for one vector unit (`isa`), with code paths of its own for AVX-512 and AVX2 and a
plain C++ one for any other. The engine runs the build for the unit torch itself runs on
(`torch.backends.cpu.get_cpu_capability()`, which `ATEN_CPU_CAPABILITY=avx2` lowers); the kernels'
tests run every build this CPU can execute (`runnable_isas`), each under its own op namespace so
that they load side by side.

They are built on first use with torch's extension builder, once per source version, vector unit
and torch version, into `~/.cache/tiergate/extensions/` (`$TIERGATE_CACHE/extensions/`), which every
checkout on the machine shares (its time: docs/engine-cpu.md). Processes that start together take
turns on an flock, which the kernel drops when its holder dies; the builder's own lock file would
leave every later load waiting forever behind a worker killed during start-up. Each build runs in
a folder of its own and the library is moved into place whole; later processes load it directly.
The flags name the vector unit that torch itself found, never -march=native: some machines
here advertise AMX that cannot be used. Where no compiler is at hand, `available()` is False
and callers use their torch versions (the attention's copies the context out of the pool).
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
from pathlib import Path

import torch

log = logging.getLogger("tiergate.engine")
SOURCES = [Path(__file__).parent / "csrc" / name for name in ("paged_decode_cpu.cpp", "int8_linear_cpu.cpp", "int4_linear_cpu.cpp")]
# the cache root of backends.engine.model.models, which this lower layer cannot import
BUILDS = Path(os.environ.get("TIERGATE_CACHE", Path.home() / ".cache" / "tiergate")) / "extensions"
# ATen's Vectorized<float> picks its registers from CPU_CAPABILITY_*, as in torch's own kernels
VECTOR_FLAGS = {
    "avx512": ["-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512", "-mavx512f", "-mavx512bw", "-mavx512vl",
               "-mavx512dq", "-mavx2", "-mfma", "-mf16c"],
    "avx2": ["-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2", "-mavx2", "-mfma", "-mf16c"],
    "default": [],  # plain C++: the code paths of a CPU with neither
}
# /proc/cpuinfo flags each build's instructions need
NEEDS = {"avx512": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "fma", "f16c"},
         "avx2": {"avx2", "fma", "f16c"}, "default": set()}


# The build the engine runs: the vector unit torch runs on, as a name of VECTOR_FLAGS's (an
# unknown one, e.g. an ARM unit's, gets the plain C++ build under its own name).
ACTIVE_ISA = torch.backends.cpu.get_cpu_capability().lower()
OPS = ("paged_decode", "int8_linear", "int4_linear")
_loaded: bool | None = None  # a plain global, so compiled graphs read it as a constant
_built: dict[str, bool] = {}  # isa -> loaded, for the builds other than the engine's
# isa -> op name -> the op, looked up once: compiled graphs trace a dict, not torch.ops by name
_ops: dict[str, dict[str, object]] = {}


def runnable_isas() -> list[str]:
    """Every build of VECTOR_FLAGS this CPU can execute, widest first."""
    flags = cpu_flags()
    return [isa for isa in VECTOR_FLAGS if NEEDS[isa] <= flags]


def available() -> bool:
    """Builds and loads the engine's ops once per process; False (with the reason logged) if it cannot."""
    global _loaded
    if _loaded is None:
        _loaded = _load(ACTIVE_ISA)
    return _loaded


def load(isa: str) -> bool:
    """Builds and loads the ops for `isa` (tests: a build other than the engine's); False if it cannot."""
    if isa == ACTIVE_ISA:
        return available()
    if isa not in _built:
        _built[isa] = _load(isa)
    return _built[isa]


def ops(isa: str | None = None) -> dict[str, object]:
    """The ops of the build for `isa` (default: the engine's), by name; it must be loaded."""
    return _ops[isa or ACTIVE_ISA]


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux names them in /proc/cpuinfo (empty elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _load(isa: str) -> bool:
    from torch.utils import cpp_extension

    if shutil.which("ninja") is None:  # the builder looks on PATH; pip put ninja beside this Python
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

    namespace = f"tiergate_{isa}"
    flags = ["-O3", "-fopenmp", f"-DTIERGATE_OPS={namespace}", *VECTOR_FLAGS.get(isa, [])]
    if isa == "avx512" and "avx512_vnni" in cpu_flags():
        flags.append("-mavx512vnni")  # the int4 kernel's pairs sum in one instruction
    name = f"tiergate_cpu_kernels_{isa}"
    source_bytes = b"".join(path.read_bytes() for path in sorted(SOURCES[0].parent.iterdir()))  # headers too
    version = hashlib.sha256(source_bytes + repr((flags, torch.__version__)).encode()).hexdigest()[:12]
    library = BUILDS / f"{name}-{version}.so"
    began = time.perf_counter()
    try:
        built = False  # the builder loads the op it builds
        if not library.exists():
            BUILDS.mkdir(parents=True, exist_ok=True)
            with open(BUILDS / f"{library.stem}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not library.exists():  # else another process built it while this one waited
                    log.info("building the C++ CPU kernels for %s (once, ~60 s) ...", isa)
                    with tempfile.TemporaryDirectory(dir=BUILDS) as scratch:
                        cpp_extension.load(name=name, sources=[str(source) for source in SOURCES],
                                           extra_cflags=flags, extra_ldflags=["-fopenmp"], build_directory=scratch,
                                           is_python_module=False)
                        os.replace(Path(scratch) / f"{name}.so", library)  # atomic: all of it or nothing
                    built = True
        if not built:
            torch.ops.load_library(str(library))
    except (OSError, RuntimeError, ImportError) as error:  # no compiler or ninja: the torch path serves
        log.warning("C++ CPU kernels unavailable, using the torch versions: %s", error)
        return False
    # torch.compile traces the op through its output shape, never running it
    torch.library.register_fake(f"{namespace}::paged_decode")(_like_query)
    torch.library.register_fake(f"{namespace}::int8_linear")(_linear_shape)
    torch.library.register_fake(f"{namespace}::int4_linear")(_int4_linear_shape)
    _ops[isa] = {op: getattr(getattr(torch.ops, namespace), op) for op in OPS}
    log.info("C++ CPU kernels for %s ready in %.1f s", isa, time.perf_counter() - began)
    return True


def _like_query(query, *args):
    return query.new_empty(query.shape)


def _linear_shape(x, codes, scales):
    return x.new_empty((x.shape[0], codes.shape[0]), dtype=torch.float32)


def _int4_linear_shape(x, tiles, group_size):
    return x.new_empty((x.shape[0], tiles.shape[0] * 4), dtype=torch.float32)  # 4 output rows a tile


def paged_decode(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                 context_lens: torch.Tensor, scale: float, sliding_window: int | None, softcap: float | None,
                 isa: str | None = None):
    """query [B, Hq, D], one token per sequence, attends over the first context_lens[b] tokens
    of its blocks (the last `sliding_window` of them, if set); returns [B, Hq, D]. `isa`: which
    build (default: the engine's)."""
    return ops(isa)["paged_decode"](query, k_cache, v_cache, block_tables, context_lens, float(scale),
                                           sliding_window or 0, softcap or 0.0)


MAX_IN_FEATURES = 16384  # the int kernels' int32 sums cannot overflow below this


def int8_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, isa: str | None = None) -> torch.Tensor:
    """x [M, K] (any float dtype) times int8 codes [N, K] with one scale per row -> fp32 [M, N].
    Each row of x is rounded to int16 with its own scale, and the sums are exact in int32."""
    return ops(isa)["int8_linear"](x, codes, scales)


def int4_linear(x: torch.Tensor, tiles: torch.Tensor, group_size: int, isa: str | None = None) -> torch.Tensor:
    """x [M, K] (any float dtype) times int4 weights in tiles (quantized_linear.pack_int4_tiles)
    -> fp32 [M, N]. Each group of a row of x is rounded with its own scale, to int16
    (int4_activation_levels: 16383 steps each side of 0) or, in the AVX2 build, to int8 (127) as
    llama.cpp rounds it, for byte-wide products; within a group the sums are exact in int32."""
    if not available():  # tiles are made only where the kernels built (quantize.cpu_kernel)
        raise RuntimeError("the C++ CPU kernels are unavailable (see the log), so int4 tiles cannot be multiplied")
    return ops(isa)["int4_linear"](x, tiles, group_size)


def int4_activation_levels(isa: str | None = None) -> int:
    """The steps each side of 0 that int4_linear rounds a group of x to, in the build for `isa`."""
    return 127 if (isa or ACTIVE_ISA) == "avx2" else 16383
