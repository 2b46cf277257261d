"""A tenant's `routing:` policy: the cascade (docs/routing.md, Cascade: configuration)."""
from __future__ import annotations

from dataclasses import dataclass

from typedconfig import Fields, setting

CASCADE_MODES = ("off", "allow", "on")


def cascade_mode(f: Fields, key: str) -> str:
    value = f.get(key, "allow")
    if isinstance(value, bool):  # YAML 1.1 reads an unquoted off/on as a boolean
        value = "on" if value else "off"
    if value not in CASCADE_MODES:
        f.fail(key, f"must be one of {', '.join(CASCADE_MODES)}, got {value!r}")
    return value
# classifier/cascade_confidence.DEFAULT_THRESHOLD, which policies may not import (a test holds them equal);
# the confidence is a margin in nats, at most classifier/cascade_confidence.MAX_MARGIN
CASCADE_THRESHOLD = 0.0
CASCADE_MAX_MARGIN = 20.0
MAX_HOLD_TOKENS = 4096  # a held stream keeps this many tokens in the gateway at most


@dataclass(frozen=True)
class CascadePolicy:
    mode: str = setting("allow", "off: never (a request asking for it gets 403); allow: only requests with "
                                 "\"cascade\": true; on: every routed request unless it sends \"cascade\": false. "
                                 "A cascade may bill two answers (docs/routing.md, Cascade).", choices=CASCADE_MODES,
                        parse=lambda f, k: cascade_mode(f, k))
    threshold: float = setting(CASCADE_THRESHOLD, "The cheap tier's answer is kept when its confidence "
                                                  "(classifier/cascade_confidence.py) is at least this; below "
                                                  "it, one usable tier up is asked.", minimum=-1000.0,
                               maximum=CASCADE_MAX_MARGIN)
    calibrate: bool = setting(True, "Replace threshold with one calibrated on this tenant's own verdicts from the "
                                    "quality monitor once the guard accepts one (docs/routing.md, Cascade: "
                                    "configuration); false: threshold always serves and no verdicts are kept.")
    hold_tokens: int = setting(32, "A cascaded stream longer than hold_whole_max_tokens holds back this many "
                                   "tokens of the cheap tier's answer to decide on.", minimum=1,
                               maximum=MAX_HOLD_TOKENS)
    hold_whole_max_tokens: int = setting(256, "A cascaded stream whose max_tokens is at most this holds back "
                                              "the whole cheap answer before deciding.", minimum=0,
                                         maximum=MAX_HOLD_TOKENS)


@dataclass(frozen=True)
class RoutingPolicy:
    cascade: CascadePolicy = setting(CascadePolicy(), "The cascade: the routed tier answers first and its own "
                                                      "confidence decides whether the next usable tier up is "
                                                      "asked (docs/routing.md, Cascade: configuration).")

