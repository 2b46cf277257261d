"""The typed inputs and result of the routing decision (policies/decision.py).

Pure data, importable by the gateway and policies alike: the gateway builds a RouteRequest,
the decision returns a Decision, accounting reads `routed_by` and /v1/route shows `steps`.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

from wire.capabilities import Capabilities, Needs

AUTO = "auto"


class RoutedBy(str, enum.Enum):
    CLASSIFIER = "classifier"   # the classifier's level (thresholds, quality shift, capabilities)
    PINNED = "pinned"           # the tenant's pinned_routes
    POLICY = "policy"           # a tenant rule moved it (preference, bias, min/max, allowed, soft budget)
    EXPLICIT = "explicit"       # the client named the tier or model, and no rule moved it
    ESCALATION = "escalation"   # set after serving: no worker of the tier, the next tier up answered
    FAILOVER = "failover"       # set after serving: another worker of the tier answered


class StepKind(str, enum.Enum):
    SCORES = "scores"
    THRESHOLDS = "thresholds"
    LEVEL = "level"
    REQUESTED = "requested"
    PINNED = "pinned"
    TIER_BIAS = "tier_bias"
    BOUNDS = "bounds"
    ALLOWED_TIERS = "allowed_tiers"
    CAPABILITIES = "capabilities"
    SOFT_BUDGET = "soft_budget"
    CHOSEN = "chosen"
    LIMITS = "limits"


@dataclass(frozen=True)
class Step:
    kind: StepKind
    detail: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.kind.value, **self.detail}


@dataclass(frozen=True)
class Signal:
    """The classifier's output: its own level, and its scores with calibrated thresholds if it has them."""
    level: int
    scores: tuple[float, ...] | None = None            # P(level 1..4)
    thresholds: Mapping[int, float] | None = None      # calibrated threshold on P(level >= k), k = 2..4
    quality_shift: Mapping[int, float] | None = None   # the quality monitor's shift, added to those
    # quality target -> threshold on the gain forgone (the outcome model's calibration); with it a
    # tenant's quality_target picks the calibrated thresholds
    target_thresholds: Mapping[float, float] | None = None


@dataclass(frozen=True)
class RouteRequest:
    requested_model: str                # 'auto', a tier name or a model name (aliases resolved)
    signal: Signal | None = None        # for 'auto'
    needs: Needs = Needs()
    capabilities: Mapping[str, Capabilities] = field(default_factory=dict)  # tier name -> what it can do
    explain: bool = False               # record Decision.steps (the dry run; the same decision either way)


@dataclass(frozen=True)
class Decision:
    tier_name: str
    routed_by: RoutedBy
    steps: tuple[Step, ...] = ()        # filled when the request asked to explain
    baseline_tier: str | None = None    # the tier before any tenant rule (classifier's or the request's)
    unshifted_tier: str | None = None   # the tier without the quality shift, when that differs
    max_tokens_cap: int | None = None
    priority: str = "interactive"
    sampling_rate: float | None = None
    structured_escalation: bool = True
    usable_tiers: tuple[str, ...] = ()  # tiers this tenant may use that can serve this request

    def explain(self) -> list[dict[str, Any]]:
        return [step.as_dict() for step in self.steps]
