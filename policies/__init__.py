"""Tenants, API keys, routing policies, rate limits and budgets enforced through Redis."""
from policies.config import PoliciesConfig, Tenant, TenantPolicy, parse_policies
from policies.decision import Decision, RoutedBy, RouteRequest, Signal, UsageSnapshot, decide_route
from policies.service import Admission, PolicyService, RedisAccess

__all__ = ["Admission", "Decision", "PoliciesConfig", "PolicyService", "RedisAccess", "RouteRequest",
           "RoutedBy", "Signal", "Tenant", "TenantPolicy", "UsageSnapshot", "decide_route", "parse_policies"]
