"""A model identity as one short digest, the same on both sides: the worker states the identity
in its `/v1/models` card and its digest on every answer (IDENTITY_HEADER); the gateway's
response cache keys answers on the card's and keeps an answer only if its header agrees."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

IDENTITY_HEADER = "x-tiergate-model-identity"
# the engine settings that change a model's numbers, stated in the card beside the weights' digest
NUMERIC_SETTINGS = ("dtype", "kv_cache_dtype", "quantization", "quant_group_size", "device", "speculative",
                    "draft_model")


def identity_digest(identity: Mapping) -> str:
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
