"""Which model answers for which tier level, and how it is prompted.

config/tiergate.yaml serves SmolLM2-135M-Instruct on every tier (level 1 int4 weights, levels 2-4
fp32; levels 3 and 4 with prompt-lookup speculation, which leaves greedy output unchanged), so
level 2 stands for 3 too. Level 4 is the strongest model the project ships, Gemma 3 270M base,
prompted with a few worked examples: what a deployment would put at its top tier, measured in
benchmarks/data/outcome_set/README.md."""
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
    1: Level(1, "smollm2-135m", "int4", CHAT),
    2: Level(2, "smollm2-135m", None, CHAT),
    4: Level(4, "gemma3-270m", None, FEW_SHOT),
}
