"""Tenants, API keys, routing policies, rate limits and budgets enforced through Redis."""
from policies.config import PoliciesConfig, Tenant, TenantPolicy, load_policies_file, parse_policies
from policies.decision import Decision, RoutedBy, RouteRequest, Signal, UsageSnapshot, decide
from policies.fields import PolicyConfigError
from policies.service import Admission, PolicyService

__all__ = ["Admission", "Decision", "PoliciesConfig", "PolicyConfigError", "PolicyService", "RouteRequest",
           "RoutedBy", "Signal", "Tenant", "TenantPolicy", "UsageSnapshot", "decide", "load_policies_file",
           "parse_policies"]
