"""Our C++ CPU kernels, as ops of `torch.ops.tiergate`:

- `paged_decode` (csrc/paged_decode_cpu.cpp): decode attention that reads K/V where they lie
  in the block pool;
- `int8_linear` (csrc/int8_linear_cpu.cpp): weight-only int8 linear for decode-sized inputs
  (the int8 LM head);
- `int4_linear` (csrc/int4_linear_cpu.cpp): group-wise int4 linear for decode-sized inputs.

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
    "AVX512": ["-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512", "-mavx512f", "-mavx512bw", "-mavx512vl",
               "-mavx512dq", "-mavx2", "-mfma", "-mf16c"],
    "AVX2": ["-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2", "-mavx2", "-mfma", "-mf16c"],
}


_loaded: bool | None = None  # a plain global, so compiled graphs read it as a constant


def available() -> bool:
    """Builds and loads the ops once per process; False (with the reason logged) if it cannot."""
    global _loaded
    if _loaded is None:
        _loaded = _load()
    return _loaded


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux names them in /proc/cpuinfo (empty elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _load() -> bool:
    from torch.utils import cpp_extension

    if shutil.which("ninja") is None:  # the builder looks on PATH; pip put ninja beside this Python
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

    capability = torch.backends.cpu.get_cpu_capability()
    flags = ["-O3", "-fopenmp", *VECTOR_FLAGS.get(capability, [])]
    if capability == "AVX512" and "avx512_vnni" in cpu_flags():
        flags.append("-mavx512vnni")  # the int4 kernel's pairs sum in one instruction
    name = f"tiergate_cpu_kernels_{capability.lower()}"
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
                    log.info("building the C++ CPU kernels for %s (once, ~60 s) ...", capability)
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
    torch.library.register_fake("tiergate::paged_decode")(_like_query)
    torch.library.register_fake("tiergate::int8_linear")(_linear_shape)
    torch.library.register_fake("tiergate::int4_linear")(_int4_linear_shape)
    log.info("C++ CPU kernels ready in %.1f s", time.perf_counter() - began)
    return True


def _like_query(query, *args):
    return query.new_empty(query.shape)


def _linear_shape(x, codes, scales):
    return x.new_empty((x.shape[0], codes.shape[0]), dtype=torch.float32)


def _int4_linear_shape(x, tiles, group_size):
    return x.new_empty((x.shape[0], tiles.shape[0] * 4), dtype=torch.float32)  # 4 output rows a tile


def paged_decode(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                 context_lens: torch.Tensor, scale: float, sliding_window: int | None, softcap: float | None):
    """query [B, Hq, D], one token per sequence, attends over the first context_lens[b] tokens
    of its blocks (the last `sliding_window` of them, if set); returns [B, Hq, D]."""
    return torch.ops.tiergate.paged_decode(query, k_cache, v_cache, block_tables, context_lens, float(scale),
                                           sliding_window or 0, softcap or 0.0)


MAX_IN_FEATURES = 16384  # the int kernels' int32 sums cannot overflow below this


def int8_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """x [M, K] (any float dtype) times int8 codes [N, K] with one scale per row -> fp32 [M, N].
    Each row of x is rounded to int16 with its own scale, and the sums are exact in int32."""
    return torch.ops.tiergate.int8_linear(x, codes, scales)


def int4_linear(x: torch.Tensor, tiles: torch.Tensor, group_size: int) -> torch.Tensor:
    """x [M, K] (any float dtype) times int4 weights in tiles (quantized_linear.pack_int4_tiles)
    -> fp32 [M, N]. Each row of x is rounded to int16 with its own scale; within a group the sums
    are exact in int32."""
    if not available():  # tiles are made only where the kernels built (quantize.cpu_kernel)
        raise RuntimeError("the C++ CPU kernels are unavailable (see the log), so int4 tiles cannot be multiplied")
    return torch.ops.tiergate.int4_linear(x, tiles, group_size)
