"""The committed dataset: size, variety, deterministic generation, truly held-out templates."""
import filecmp
from collections import Counter
from pathlib import Path

from classifier.dataset import PACKAGED_DATA_DIR
from classifier.datagen.generate import HELDOUT_DOMAINS, all_domains, write


def test_size_and_variety(splits):
    rows = [r for rs in splits.values() for r in rs]
    assert sum(len(splits[name]) for name in ("train", "validation", "test")) >= 8000  # issue 12
    assert sum(len(d.templates) for d in all_domains()) >= 100 and len(all_domains()) >= 20
    assert set(Counter(r["tier"] for r in rows)) == {1, 2, 3, 4}
    styles = Counter(r["style"].split("+")[0] for r in rows)
    assert styles["completion"] > 100 and styles["chat"] > 1000
    assert sum("multiturn" in r["style"] for r in rows) > 200
    assert sum(not (r.get("prompt") or r["messages"][-1]["content"]).isascii() for r in rows) > 100
    lengths = [len(r.get("prompt") or r["messages"][-1]["content"]) for r in rows]
    assert min(lengths) <= 10 and max(lengths) >= 4000
    assert sum(f.stat().st_size for f in PACKAGED_DATA_DIR.glob("*.jsonl")) < 5_000_000


def test_heldout_is_disjoint_in_templates_and_domains(splits):
    seen = {r["template"] for name in ("train", "validation", "test") for r in splits[name]}
    held = {r["template"] for r in splits["heldout"]}
    assert held and not held & seen
    assert {r["template"] for r in splits["validation"]}.isdisjoint(r["template"] for r in splits["train"])
    seen_domains = {r["domain"] for name in ("train", "validation", "test") for r in splits[name]}
    assert set(HELDOUT_DOMAINS) <= {r["domain"] for r in splits["heldout"]}
    assert not set(HELDOUT_DOMAINS) & seen_domains


def test_generator_is_deterministic(tmp_path: Path):
    write(tmp_path)
    for name in ("train", "validation", "test", "heldout"):
        assert filecmp.cmp(tmp_path / f"{name}.jsonl", PACKAGED_DATA_DIR / f"{name}.jsonl", shallow=False), name
