"""RecordingPolicy: a small real implementation of the PolicyService protocol written for the
gateway's tests (policies/ provides the production one): one key, a max_tokens cap and batch
priority in its decision, a request cap, and a record of what each admission reserved and of each
settle, so the gateway's side of the contract can be checked."""
from __future__ import annotations

from dataclasses import dataclass, replace

from gateway.core.policy_seam import OpenPolicy
from policies.decision_types import Step, StepKind
from wire.errors import OpenAIError


@dataclass(frozen=True)
class Team:
    name: str


class RecordingPolicy:
    def __init__(self, max_requests: int = 100, cap: int = 2):
        self.settled: list[tuple] = []
        self.reserved: list[int] = []  # the max_tokens each admission reserved
        self.admitted = 0
        self.max_requests = max_requests
        self.cap = cap

    def authenticate(self, authorization):
        if authorization != "Bearer key-a":
            raise OpenAIError(401, "invalid API key", code="invalid_api_key")
        return Team("team-a")

    def decide(self, tenant, request, tiers):
        base = OpenPolicy().decide(tenant, request, tiers)
        cap = Step(StepKind.LIMITS, {"max_tokens_cap": self.cap, "priority": "batch"})
        return replace(base, steps=base.steps + (cap,), max_tokens_cap=self.cap, priority="batch")

    async def count_request(self, tenant, request_id):
        return None  # only generations count against its request cap

    async def hold(self, tenant):
        return None  # no limit on open requests

    async def let_go(self, slot):
        return None

    async def admit(self, tenant, request_id, estimated_prompt_tokens, max_tokens, **kwargs):
        if self.admitted >= self.max_requests:
            raise OpenAIError(429, "rate limit reached", code="rate_limit_exceeded", headers={"Retry-After": "7"})
        self.admitted += 1
        self.reserved.append(max_tokens)
        return ("admission", request_id, max_tokens)

    async def settle(self, admission, request_id, tier_name, prompt_tokens, completion_tokens, usage_source="worker",
                     price=None):
        self.settled.append((admission[1], tier_name, prompt_tokens, completion_tokens))
