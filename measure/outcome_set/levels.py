"""Which model answers for which tier level, and how it is prompted.

config/tiergate.yaml serves SmolLM2-135M-Instruct on every tier: level 1 with int4 weights, levels
2-4 in fp32 (3 and 4 with prompt-lookup speculation, which leaves greedy output unchanged). No
clearly stronger instruct model is installable here, so the set also asks the other model the
project ships, Gemma 3 270M base, with a few worked examples. Measured on all 2,400 questions it is
the weakest of the three (benchmarks/data/outcome_set/README.md), so the set's levels order the
answerers by measured accuracy: Gemma 1, SmolLM2 int4 2, SmolLM2 fp32 4."""
from __future__ import annotations

from dataclasses import dataclass

CHAT, FEW_SHOT = "chat", "few_shot"


@dataclass(frozen=True)
class Level:
    level: int
    model: str  # bundled model name or a prepared model folder
    quantization: str | None  # as the tier's worker runs it
    prompt: str  # CHAT: the item's messages through the chat template; FEW_SHOT: examples, then the question


LEVELS = {
    1: Level(1, "gemma3-270m", None, FEW_SHOT),
    2: Level(2, "smollm2-135m", "int4", CHAT),
    4: Level(4, "smollm2-135m", None, CHAT),
}
