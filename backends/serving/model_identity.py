"""What model this worker serves, stated in its `/v1/models` card as `identity`: the model's
name, a digest of its weight and config files, and the engine settings that change its numbers
(dtype, quantization, device). The gateway's response cache keys answers on it, so answers of
other weights or settings are never served for this model (docs/caching.md).

Hashing a model's files takes about a second per GB; the digest is kept next to the other
caches, under the files' sizes and modification times, so a restart of the same files reads it."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from wire.model_identity import NUMERIC_SETTINGS

from ..engine.config import EngineConfig
from ..engine.model.models import cache_root, model_dir

# the files whose bytes make the model's answers: weights, architecture, tokenizer, chat template
HASHED = ("*.safetensors", "*.bin", "*.gguf", "config.json", "generation_config.json", "tokenizer*.json",
          "chat_template.jinja")


def _files(folder: Path) -> list[Path]:
    return sorted({p for pattern in HASHED for p in folder.glob(pattern) if p.is_file()})


def files_digest(folder: Path) -> str:
    """SHA-256 over the model folder's files (names and bytes), remembered per (path, size, mtime)."""
    files = _files(folder)
    stamp = json.dumps([[str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in files])
    memo = cache_root() / "model-digests" / (hashlib.sha256(stamp.encode()).hexdigest() + ".sha256")
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as fh:
            digest.update(hashlib.file_digest(fh, "sha256").digest())
    value = digest.hexdigest()
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(value)
    except OSError:  # a read-only cache: hashed again at the next start
        pass
    return value


def model_identity(config: EngineConfig, served_name: str) -> dict:
    """The card's `identity`; a model handed in without a folder (tests) states no weights digest."""
    try:
        weights = files_digest(model_dir(config.model))
    except KeyError:
        weights = None
    return {"model": served_name, "weights_sha256": weights,
            "settings": {name: getattr(config, name) for name in NUMERIC_SETTINGS}}
