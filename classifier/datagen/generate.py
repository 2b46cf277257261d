"""Deterministic dataset generator: every template x varied fillers x request styles.

Splits: `train` and `test` share templates (different fillers and styles);
`validation` holds its own unseen templates (for model selection and calibration);
`heldout` holds whole templates and whole domains that appear in no other split, so a
model that memorises templates cannot score well on it. The hand-written request pools
(`varied.py`) add whole requests in many surface forms, split by entry.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from pathlib import Path

from . import domains_everyday, domains_knowledge, domains_math_lang, domains_tech, varied
from .fillers import GLOBAL_SLOTS, code_snippet, document, numbers
from .spec import Domain, Template
from .styles import stacked_constraints, wrap

HELDOUT_DOMAINS = ("music", "legal")
ROWS_PER_TEMPLATE = 18
CONSTRAINT_SHARE = 0.15
SPLIT_SHARES = (("train", 0.85), ("test", 0.15))
_SLOT = re.compile(r"\{(\w+)\}")


def all_domains() -> list[Domain]:
    mods = (domains_knowledge, domains_tech, domains_everyday, domains_math_lang)
    return [d for m in mods for d in m.DOMAINS]


def _stable_int(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def heldout_templates(domains: list[Domain]) -> set[str]:
    """Whole held-out domains plus one template from every other domain with >= 5 templates."""
    held = set()
    for d in domains:
        temps = d.expanded()
        if d.name in HELDOUT_DOMAINS:
            held.update(t.id for t in temps)
        elif len(temps) >= 5:
            held.add(temps[_stable_int(d.name) % len(temps)].id)
    return held


def validation_templates(domains: list[Domain], held: set[str]) -> set[str]:
    """One more unseen template per domain with >= 6 templates: model selection and
    threshold calibration then see the template shift that real traffic brings."""
    chosen = set()
    for d in domains:
        temps = [t for t in d.expanded() if t.id not in held]
        if d.name not in HELDOUT_DOMAINS and len(d.templates) >= 6:
            chosen.add(temps[_stable_int("validation/" + d.name) % len(temps)].id)
    return chosen


def _filler(rng: random.Random, domain: Domain):
    values = numbers(rng)

    def pick(key: str) -> str:
        if key not in values:
            if key == "document":
                long = rng.random() < 0.15
                values[key] = document(rng, rng.randint(30, 70) if long else rng.randint(2, 8))
            elif key == "code":
                values[key] = code_snippet(rng, long=rng.random() < 0.15)
            else:
                pool = domain.slots.get(key) or GLOBAL_SLOTS.get(key)
                if pool is None:
                    raise KeyError(f"template slot {{{key}}} has no filler (domain {domain.name})")
                values[key] = rng.choice(pool)
        return values[key]

    return lambda text: _SLOT.sub(lambda m: pick(m.group(1)), text)


def make_row(rng: random.Random, domain: Domain, template: Template) -> dict:
    fill = _filler(rng, domain)
    task, tier, extra = fill(template.text), template.tier, ""
    if tier in (2, 3) and domain.name != "multilingual" and rng.random() < CONSTRAINT_SHARE:
        task += fill(stacked_constraints(rng))
        tier, extra = tier + 1, "+constraints"
    body, style = wrap(rng, task, fill)
    return {**body, "tier": tier, "template": template.id, "domain": domain.name, "style": style + extra}


def generate(seed: int = 20261123) -> dict[str, list[dict]]:
    rng = random.Random(seed)
    domains = all_domains()
    held = heldout_templates(domains)
    val = validation_templates(domains, held)
    splits: dict[str, list[dict]] = {"train": [], "validation": [], "test": [], "heldout": []}
    seen: set[str] = set()
    for domain in domains:
        for template in domain.expanded():
            made = attempts = 0
            while made < ROWS_PER_TEMPLATE and attempts < ROWS_PER_TEMPLATE * 6:
                attempts += 1
                row = make_row(rng, domain, template)
                key = json.dumps([row.get("messages"), row.get("prompt")], ensure_ascii=False)
                if key in seen:
                    continue
                seen.add(key)
                made += 1
                split = "heldout" if template.id in held else "validation" if template.id in val else _split_of(rng)
                splits[split].append(row)
    for split, row in varied.rows(rng):
        key = json.dumps([row.get("messages"), row.get("prompt")], ensure_ascii=False)
        if key not in seen:
            seen.add(key)
            splits[split].append(row)
    return splits


def _split_of(rng: random.Random) -> str:
    roll, acc = rng.random(), 0.0
    for name, share in SPLIT_SHARES:
        acc += share
        if roll < acc:
            return name
    return SPLIT_SHARES[-1][0]


def stats(splits: dict[str, list[dict]]) -> dict:
    domains = all_domains()
    rows = [r for rs in splits.values() for r in rs]
    return {
        "templates": sum(len(d.templates) for d in domains),
        "domains": len(domains),
        "templates_used": len({r["template"] for r in rows}),
        "heldout_domains": list(HELDOUT_DOMAINS),
        "heldout_templates": len({r["template"] for r in splits["heldout"]}),
        "validation_templates": len({r["template"] for r in splits["validation"]}),
        "system_prompts_and_styles": len({r["style"] for r in rows}),
        "rows": {k: len(v) for k, v in splits.items()},
        "label_distribution": {str(t): c for t, c in sorted(Counter(r["tier"] for r in rows).items())},
    }


def write(out_dir: Path, seed: int = 20261123) -> dict:
    splits = generate(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        with open(out_dir / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary = stats(splits)
    (out_dir / "stats.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
