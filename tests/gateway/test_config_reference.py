"""config/REFERENCE.md is generated from the dataclasses that parse the config, and committed current."""
from pathlib import Path

from gateway.config.reference import reference

ROOT = Path(__file__).resolve().parents[2]


def test_committed_reference_is_current():
    committed = (ROOT / "config" / "REFERENCE.md").read_text()
    assert committed == reference(), "run: python -m gateway.config.reference > config/REFERENCE.md"


def test_reference_lists_every_section_with_type_default_and_meaning():
    text = reference()
    for row in ("| `redis.key_prefix` | str | \"tiergate:\" | Prefix of every Redis key",
                "| `tiers[].workers[].url` | str | required |",
                "| `quality.sampling_rate` | float (>= 0, <= 1) | 0.05 |",
                "| `policy.on_redis_error` | str (open \\| closed) | \"open\" |",
                "| `tenants.<name>.keys[].sha256` | str | required |"):
        assert row in text, row
    assert "policy.key_prefix" not in text and "redis_timeout_s" not in text  # one knob each
