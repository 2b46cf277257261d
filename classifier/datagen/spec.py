"""The shape of the hand-written prompt sources: a domain holds templates and slot fillers."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Template:
    """One hand-written prompt pattern; its tier is assigned by RUBRIC.md."""
    domain: str
    index: int
    tier: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.domain}/{self.index}"


@dataclass
class Domain:
    name: str
    templates: list[tuple[int, str]]
    slots: dict[str, list[str]] = field(default_factory=dict)

    def expanded(self) -> list[Template]:
        return [Template(self.name, i, tier, text) for i, (tier, text) in enumerate(self.templates)]
