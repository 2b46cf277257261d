"""llama.cpp's C++ `llama-server`, built once per instruction set from the llama-cpp-python source
package (which vendors llama.cpp) into a cache folder outside the repository.

A native build (-march=native) dies with "Illegal instruction" on these machines (AMX is
advertised but unusable), so the CPU features are named explicitly. `isa="avx2"` builds with no
AVX-512 (nor AVX-VNNI) at all, as for a CPU that has only AVX2: on an AVX-512 machine it gives
the AVX2 figures that our worker's `ATEN_CPU_CAPABILITY=avx2` is compared with."""
from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from backends.engine.model.models import cache_root
from kernels.cpu_kernels import cpu_flags

ISAS = ("avx2", "avx512")
BASE_FLAGS = ["-DLLAMA_CURL=OFF", "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
              "-DGGML_F16C=ON", "-DCMAKE_BUILD_TYPE=Release"]
AVX512_FLAGS = {"avx512f": "-DGGML_AVX512=ON", "avx512_vnni": "-DGGML_AVX512_VNNI=ON",
                "avx512_bf16": "-DGGML_AVX512_BF16=ON"}  # /proc/cpuinfo flag -> the cmake switch
# every wider switch off by name, so no default of the vendored version can turn one on
AVX2_ONLY_FLAGS = ["-DGGML_AVX512=OFF", "-DGGML_AVX512_VNNI=OFF", "-DGGML_AVX512_VBMI=OFF",
                   "-DGGML_AVX512_BF16=OFF", "-DGGML_AVX_VNNI=OFF"]


def machine_isa(cpu_flags: set[str]) -> str:
    """The widest of ISAS this CPU runs."""
    return "avx512" if "avx512f" in cpu_flags else "avx2"


def cmake_flags(cpu_flags: set[str], isa: str) -> list[str]:
    """AVX2 always; for "avx512", each AVX-512 extension only where the CPU has it (machines differ:
    an AVX2-only EPYC dies with "Illegal instruction" on an AVX-512 build)."""
    if isa not in ISAS:
        raise ValueError(f"isa is one of {ISAS}, not {isa!r}")
    if isa == "avx2":
        return BASE_FLAGS + AVX2_ONLY_FLAGS
    if machine_isa(cpu_flags) != "avx512":
        raise ValueError("this CPU has no AVX-512 (no avx512f in /proc/cpuinfo)")
    return BASE_FLAGS + [switch for flag, switch in AVX512_FLAGS.items() if flag in cpu_flags]


def _source(root: Path) -> Path:
    found = sorted(root.glob("llama_cpp_python-*/vendor/llama.cpp"))
    if found:
        return found[-1]
    print("[llama.cpp] downloading the llama-cpp-python sdist ...", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    "llama-cpp-python", "-d", str(root / "sdist")], check=True)
    with tarfile.open(sorted((root / "sdist").glob("llama_cpp_python-*.tar.gz"))[-1]) as archive:
        archive.extractall(root, filter="data")
    return sorted(root.glob("llama_cpp_python-*/vendor/llama.cpp"))[-1]


def llama_server(isa: str | None = None) -> Path:
    """Path of the llama-server binary built for `isa` (default: the machine's widest); builds it
    first if needed (~10 min on 2 cores)."""
    isa = isa or machine_isa(cpu_flags())
    flags = cmake_flags(cpu_flags(), isa)
    root = cache_root() / "llama.cpp"
    root.mkdir(parents=True, exist_ok=True)
    source = _source(root)
    build = f"build-{isa}"
    binary = source / build / "bin" / "llama-server"
    if binary.exists():
        return binary
    print(f"[llama.cpp] building llama-server in {source / build} (one time, ~10 min) ...", flush=True)
    subprocess.run(["cmake", "-B", build, *flags], cwd=source, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "--target", "llama-server", "llama-bench", "-j2"], cwd=source,
                   check=True)
    return binary


def start_llama_server(gguf: Path, log_file: Path, slots: int = 16, isa: str | None = None
                       ) -> tuple[subprocess.Popen, str]:
    """llama-server built for `isa` on a free port with 2 threads and `slots` parallel sequences
    (1024 tokens of context each), once it answers /health; -> (process, base URL)."""
    from launcher.processes import free_port, wait_healthy

    port = free_port()
    command = [str(llama_server(isa)), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-t", "2",
               "-np", str(slots), "-c", str(1024 * slots)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(log_file, "w"))
    url = f"http://127.0.0.1:{port}"
    if not wait_healthy(url, proc, timeout_s=180):
        proc.kill()
        raise RuntimeError(f"llama-server did not become healthy; see {log_file}")
    return proc, url
