"""The cache's config is checked like every section: a shared cache names configured tenants, each
in one group, and a tenant's default TTL is within the longest it allows."""
from __future__ import annotations

import pytest

from gateway.config import parse_config
from tests.gateway.cache.cache_helpers import cache_config
from typedconfig import ConfigError


@pytest.mark.parametrize("shared, where", [
    ({"org": ["acme", "nobody"]}, "cache.shared.org: names no tenant in tenants: 'nobody'"),
    ({"org": ["acme", "globex"], "two": ["acme", "initech"]}, "tenant 'acme' is already in group 'org'"),
    ({"org": ["acme"]}, "cache.shared.org: a shared cache names at least two tenants"),
    ({"o{rg": ["acme", "globex"]}, "group names must match"),
])
def test_a_shared_cache_names_configured_tenants_each_in_one_group(shared, where):
    with pytest.raises(ConfigError) as refused:
        parse_config(cache_config("p:", cache={"shared": shared}))
    assert where in str(refused.value)


def test_a_default_ttl_past_the_longest_allowed_is_refused():
    with pytest.raises(ConfigError) as refused:
        parse_config(cache_config("p:", cache={}, tenants={"acme": {"cache": {"ttl_s": 100, "max_ttl_s": 10}}}))
    assert "tenants.acme.cache.ttl_s" in str(refused.value) or "cache.ttl_s" in str(refused.value)


def test_each_tenant_reads_its_own_cache_or_its_groups():
    config = parse_config(cache_config("p:", cache={"shared": {"org": ["acme", "globex"]}}))
    assert [config.cache.scope_of(t) for t in ("acme", "globex", "initech")] == ["g:org", "g:org", "t:initech"]
