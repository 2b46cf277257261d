"""A worker started without plan flags gets the device's fastest measured plan (engine/device_defaults.py);
a flag given either way wins, and a setting the engine refuses ends the start with one line."""
from __future__ import annotations

import pytest
from torch._inductor.runtime.cache_dir_utils import default_cache_dir

from backends import worker
from backends.worker import build_parser, plan_settings
from kernels import cpu_kernels


@pytest.fixture(autouse=True)
def inductor_cache(monkeypatch):
    """plan_settings points inductor's cache at ours when compiling: undone after each test."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "recorded")  # so that undoing restores what was there
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")


def _settings(*flags: str) -> dict:
    return plan_settings(build_parser().parse_args(["--model", "m", "--device", "cpu", *flags]))


def test_an_int4_worker_on_cpu_compiles_with_dense_prefill_and_a_bf16_pool_by_default(monkeypatch, tmp_path):
    monkeypatch.setenv("TIERGATE_CACHE", str(tmp_path))
    monkeypatch.setattr(cpu_kernels, "ACTIVE_ISA", "avx512")
    assert _settings("--quantization", "int4") == {"compile_decode": True, "int4_dense_prefill": True,
                                                   "kv_cache_dtype": "bfloat16"}
    assert worker.os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")  # kept for restarts
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # inductor's own /tmp default, filled in
    _settings("--quantization", "int4")
    assert worker.os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")


def test_where_the_kernels_run_their_avx2_build_prompt_chunks_stay_on_int4(monkeypatch):
    """Its byte products beat a dense fp32 GEMM at every row count (docs/engine-cpu.md)."""
    monkeypatch.setattr(cpu_kernels, "ACTIVE_ISA", "avx2")
    assert _settings("--quantization", "int4") == {"compile_decode": True, "int4_dense_prefill": False,
                                                   "kv_cache_dtype": "bfloat16"}
    assert _settings("--quantization", "int4", "--int4-dense-prefill")["int4_dense_prefill"] is True


def test_an_inductor_cache_the_operator_chose_stays(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    _settings("--quantization", "int4")
    assert worker.os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)


def test_given_flags_win_and_other_workers_keep_the_plain_plan():
    assert _settings("--quantization", "int4", "--no-compile", "--kv-cache-dtype", "auto") == \
        {"compile_decode": False, "int4_dense_prefill": True, "kv_cache_dtype": "auto"}
    assert _settings() == {"compile_decode": False, "int4_dense_prefill": False, "kv_cache_dtype": "auto"}
    assert _settings("--compile")["compile_decode"] is True


def test_padded_decode_replaces_the_default_decode_path_but_not_a_given_one():
    assert _settings("--quantization", "int4", "--padded-decode")["compile_decode"] is False
    assert _settings("--quantization", "int4", "--padded-decode", "--compile")["compile_decode"] is True


@pytest.mark.parametrize("flags, refusal", [
    (["--compile", "--padded-decode"], "compile_decode and padded_decode are different decode paths"),
    (["--cuda-graphs"], "cuda_graphs (--cuda-graphs) captures decode steps on a CUDA device; on the CPU, "
                        "padded_decode (--padded-decode)"),
])
def test_a_refused_setting_ends_the_start_with_one_line(flags, refusal):
    with pytest.raises(SystemExit) as exited:  # refused by name, before any weights load
        worker.main(["--model", "smollm2-135m", "--device", "cpu", *flags])
    assert str(exited.value.code).startswith(f"tiergate worker: {refusal}")

