"""Which build of the C++ kernels runs where: the engine's follows torch's vector unit, and the
tests reach every build the CPU can execute."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels import cpu_kernels


def test_every_x86_cpu_with_avx2_runs_the_avx2_and_plain_builds_and_the_engine_runs_one_of_them():
    if "avx2" not in cpu_kernels.cpu_flags():
        pytest.skip("not an x86 CPU with AVX2")
    assert {"avx2", "default"} <= set(cpu_kernels.runnable_isas())
    assert cpu_kernels.ACTIVE_ISA in cpu_kernels.runnable_isas()
    assert cpu_kernels.ACTIVE_ISA == torch.backends.cpu.get_cpu_capability().lower()


@pytest.mark.live  # a second process
def test_torch_held_to_avx2_runs_the_avx2_build_with_fp32_prompt_chunks():
    if "avx2" not in cpu_kernels.cpu_flags():
        pytest.skip("not an x86 CPU with AVX2")
    script = ("from kernels import cpu_kernels\nfrom backends.engine.quant.quantize import dense_prefill_dtype\n"
              "print(cpu_kernels.ACTIVE_ISA, cpu_kernels.available(), cpu_kernels.int4_activation_levels(), "
              "dense_prefill_dtype())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=Path(cpu_kernels.__file__).parent.parent, env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["avx2", "True", "127", "torch.float32"]
