"""Every Redis key builder, walked: the keys one call (a Lua script, a transaction, an MGET) takes
together share one Redis Cluster slot, and a tenant's keys carry the tenant as their hash tag.

The walk is kept complete by a scan of the source: every module that builds a key from the
configured prefix must be listed in BUILDERS, so a new store cannot skip this check."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from redis.crc import key_slot

from gateway.cache.config import CacheConfig
from gateway.cache.store import scope_keys
from gateway.core.affinity import prefix_keys
from gateway.batches.files import FileStore
from gateway.batches.store import BatchStore
from gateway.config import Affinity
from gateway.quality.cascade_store import CascadeStore
from gateway.quality.store import keys as quality_keys, tenant_keys as quality_tenant_keys
from gateway.batches.storage_quota import StorageQuota
from policies.alerts.store import AlertKeys
from policies.concurrency import ConcurrencyLimits
from policies.keyspace import KeySpace
from policies.periods import Periods
from policies.registry.store import KEY, TENANT, RegistryKeys

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "tg:"
TENANTS = ("acme", "beta", "a:b", "t{x}")  # names that would trip a naive tag


def _slot(key: str) -> int:
    return key_slot(key.encode())


def _keyspace_builders() -> list[str]:
    """Every method of KeySpace that names one key (all but the SCAN pattern)."""
    return [name for name, _ in inspect.getmembers(KeySpace, inspect.isfunction)
            if not name.startswith("_") and name != "tenant_pattern"]


def _keyspace_call(name: str, tenant: str) -> list[str]:
    method = getattr(KeySpace(PREFIX), name)
    params = list(inspect.signature(method).parameters)
    args = {"tenant": tenant, "day": "2026-11-27", "week": "2026-11-23", "month": "2026-11", "key_id": "k1",
            "request_id": "req-1", "member": "req-1:1:1", "period": "weekly", "label": "2026-11-23",
            "periods": Periods("2026-11-27", "2026-11-23", "2026-11")}
    built = method(*(args[p] for p in params))
    return built if isinstance(built, list) else [built]


def policies_groups(tenant: str) -> list[list[str]]:
    """All of a tenant's policy keys (and its keys' own) are taken together by admit.lua and settle.lua."""
    return [[key for name in _keyspace_builders() for key in _keyspace_call(name, tenant)]]


def storage_groups(tenant: str) -> list[list[str]]:
    return [StorageQuota(_NoRedis(), PREFIX, kind, kind, 60).keys(tenant) for kind in ("files", "responses")]


def files_groups(tenant: str) -> list[list[str]]:
    store = FileStore(_NoRedis(), PREFIX, 60, None)
    return [[store.key(tenant, "file-1"), store.index_key(tenant)]]


def batches_groups(tenant: str) -> list[list[str]]:
    store = BatchStore(_NoRedis(), PREFIX, 60, None)
    return [[store.key(tenant, "batch_1"), store.results_key(tenant, "batch_1"), store.index_key(tenant),
             store.key(tenant, "batch_1") + ":input"],
            [store.done_key(tenant, "batch_1"), store.key(tenant, "batch_1")]]  # the record script's


def concurrency_groups(tenant: str) -> list[list[str]]:
    """The take, renew and give-back scripts take the tenant's and its key's open requests."""
    return [list(ConcurrencyLimits(None, PREFIX).keys(tenant, "k1"))]


def cache_groups(tenant: str) -> list[list[str]]:
    """Each cache script takes an entry and its scope's indexes; a tenant's own and a shared one's."""
    groups = []
    for config in (CacheConfig(), CacheConfig(shared={"org": (tenant, "other")})):
        entries, index = scope_keys(PREFIX, config.scope_of(tenant))
        groups.append([*index, entries + "0f" * 32])
    return groups


def affinity_groups(_tenant: str) -> list[list[str]]:
    settings = Affinity(chunk_chars=16, max_chunks=8)
    return [prefix_keys("x" * 200 + str(n), model, settings, PREFIX, "tenant-a") for n, model in enumerate(("m1", "m2"))]


def quality_groups(tenant: str) -> list[list[str]]:
    k = quality_keys(PREFIX)
    ctl, windows = quality_tenant_keys(k, tenant)
    return [[windows + "small", k["class"] + "2", ctl, k["changes"], k["tier"] + "small", k["tenants"]]]  # record_verdict.lua's


def cascade_groups(tenant: str) -> list[list[str]]:
    """A cascade verdict's transaction: the tenant's list and count."""
    store = CascadeStore(_NoRedis(), PREFIX)
    return [[store.tenant_key(tenant, "verdicts"), store.tenant_key(tenant, "count")]]


def registry_groups(_tenant: str) -> list[list[str]]:
    """registry_write.lua takes a records hash, the audit stream and the version; the snapshot
    transaction takes both hashes and the version."""
    k = RegistryKeys(PREFIX)
    return [[k.records(kind), k.audit(), k.version()] for kind in (TENANT, KEY)] + \
        [[k.records(TENANT), k.records(KEY), k.version()]]


def alert_groups(_tenant: str) -> list[list[str]]:
    """alert_fire.lua and alert_claim.lua, and the outcome's transaction."""
    k = AlertKeys(PREFIX)
    return [[k.fired("alert_1"), k.records(), k.due(), k.index()], [k.due(), k.records()]]


# Modules that build keys from the prefix -> the multi-key calls they make. Keys used one at a
# time (a stored response, the batch runner's lease, the console's minutes, quality samples, the
# outcome stream, the active-batch set) need no shared slot and so have no group.
BUILDERS = {
    "policies/keyspace.py": policies_groups,
    "gateway/batches/storage_quota.py": storage_groups,
    "gateway/batches/files.py": files_groups,
    "gateway/batches/store.py": batches_groups,
    "gateway/core/affinity.py": affinity_groups,
    "gateway/cache/store.py": cache_groups,
    "gateway/quality/store.py": quality_groups,
    "gateway/quality/cascade_store.py": cascade_groups,
    "policies/registry/store.py": registry_groups,
    "policies/alerts/store.py": alert_groups,
    "policies/concurrency.py": concurrency_groups,
    "gateway/quality/learning.py": None,
    "gateway/dropin/response_store.py": None,
    "gateway/batches/runner.py": None,
    "gateway/console/activity.py": None,
}
KEY_FROM_PREFIX = re.compile(r'\{(?:self\.|config\.redis\.)?(?:key_)?prefix\}\w|(?:key_)?prefix \+ ["\w]')


class _NoRedis:
    """Stands in for the client where only key names are asked for: no command is sent."""

    def register_script(self, _source):
        return None


def test_every_module_that_builds_keys_is_walked():
    found = set()
    for path in [*ROOT.glob("gateway/**/*.py"), *ROOT.glob("policies/**/*.py")]:
        if KEY_FROM_PREFIX.search(path.read_text()):
            found.add(path.relative_to(ROOT).as_posix())
    assert found <= set(BUILDERS), f"key builders not walked here: {sorted(found - set(BUILDERS))}"


@pytest.mark.parametrize("module", [m for m, groups in BUILDERS.items() if groups])
def test_keys_of_one_call_share_a_slot(module):
    for tenant in TENANTS:
        for group in BUILDERS[module](tenant):
            assert len(group) >= 2, group
            slots = {_slot(key) for key in group}
            assert len(slots) == 1, f"{module}: keys of one call in slots {slots}: {group}"
            assert all("{" in key and "}" in key.split("{", 1)[1] for key in group), group


@pytest.mark.parametrize("module", ["policies/keyspace.py", "gateway/batches/storage_quota.py", "gateway/batches/files.py",
                                    "gateway/batches/store.py"])
def test_tenant_keys_are_tagged_by_their_tenant(module):
    """Tenants spread over the Cluster's masters: their keys hash by the tenant's name alone."""
    for tenant in ("acme", "beta"):
        for group in BUILDERS[module](tenant):
            assert {_slot(key) for key in group} == {_slot("{" + tenant + "}")}, group
    slots = {_slot(BUILDERS[module](f"tenant-{i}")[0][0]) for i in range(50)}
    assert len(slots) > 40  # not all on one slot


def test_one_prompt_shares_a_slot_and_prompts_spread():
    settings = Affinity(chunk_chars=16, max_chunks=8)
    slots = {_slot(prefix_keys(f"prompt {i} " + "y" * 100, "m", settings, PREFIX, "tenant-a")[0]) for i in range(50)}
    assert len(slots) > 40

