"""llama.cpp's C++ `llama-server`, built once from the llama-cpp-python source package (which
vendors llama.cpp) into a cache folder outside the repository.

A native build (-march=native) dies with "Illegal instruction" on these machines (AMX is
advertised but unusable), so the CPU features are named explicitly."""
from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from backends.engine.model.models import cache_root
from kernels.cpu_kernels import cpu_flags

BASE_FLAGS = ["-DLLAMA_CURL=OFF", "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
              "-DGGML_F16C=ON", "-DCMAKE_BUILD_TYPE=Release"]
AVX512_FLAGS = {"avx512f": "-DGGML_AVX512=ON", "avx512_vnni": "-DGGML_AVX512_VNNI=ON",
                "avx512_bf16": "-DGGML_AVX512_BF16=ON"}  # /proc/cpuinfo flag -> the cmake switch


def cmake_flags(cpu_flags: set[str]) -> list[str]:
    """AVX2 always; each AVX-512 extension only where the CPU has it (machines differ: an
    AVX2-only EPYC dies with "Illegal instruction" on an AVX-512 build)."""
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


def llama_server() -> Path:
    """Path of the built llama-server binary; builds it first if needed (~10 min on 2 cores)."""
    root = cache_root() / "llama.cpp"
    root.mkdir(parents=True, exist_ok=True)
    source = _source(root)
    flags = cmake_flags(cpu_flags())
    build = "build-" + ("avx512" if "-DGGML_AVX512=ON" in flags else "avx2")  # one per CPU kind
    binary = source / build / "bin" / "llama-server"
    if binary.exists():
        return binary
    print(f"[llama.cpp] building llama-server in {source / build} (one time, ~10 min) ...", flush=True)
    subprocess.run(["cmake", "-B", build, *flags], cwd=source, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "--target", "llama-server", "llama-bench", "-j2"], cwd=source,
                   check=True)
    return binary


def start_llama_server(gguf: Path, log_file: Path, slots: int = 16) -> tuple[subprocess.Popen, str]:
    """llama-server on a free port with 2 threads and `slots` parallel sequences (1024 tokens
    of context each), once it answers /health; -> (process, base URL)."""
    from launcher.processes import free_port, wait_healthy

    port = free_port()
    command = [str(llama_server()), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-t", "2",
               "-np", str(slots), "-c", str(1024 * slots)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(log_file, "w"))
    url = f"http://127.0.0.1:{port}"
    if not wait_healthy(url, proc, timeout_s=180):
        proc.kill()
        raise RuntimeError(f"llama-server did not become healthy; see {log_file}")
    return proc, url
