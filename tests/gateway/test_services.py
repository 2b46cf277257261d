"""The Services snapshot (gateway/core/services.py) as the process publishes it: a reload hands new
requests a new snapshot, and one already taken is never changed under a request in flight."""
from __future__ import annotations

import yaml

from gateway.core.classify import PromptLengthClassifier
from gateway.config import load_config
from gateway.state import GatewayState
from tests.gateway.gw_helpers import base_config, tier


def test_a_reload_publishes_a_new_snapshot_and_leaves_the_taken_one_whole(tmp_path, redis_prefix):
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(base_config([tier("small", 1, ["http://a.test"])], redis_prefix)))
    state = GatewayState(load_config(path), str(path), classifier=PromptLengthClassifier())
    taken = state.services
    path.write_text(yaml.safe_dump(base_config([tier("small", 1, ["http://a.test"]), tier("large", 2, ["http://b.test"])],
                                               redis_prefix)))
    assert state.reload()
    now = state.services
    assert [t.name for t in taken.config.tiers] == ["small"] and list(taken.upstreams.pools.by_tier) == ["small"]
    assert [t.name for t in now.config.tiers] == ["small", "large"] and set(now.router.capabilities) == {"small",
                                                                                                     "large"}
    # what a reload keeps: the one classifier slot, the retry budget's window, the quality monitor
    assert now.router.classifiers is taken.router.classifiers
    assert now.upstreams.retry_budget is taken.upstreams.retry_budget and now.sinks.quality is state.quality
    assert now.router.policy is now.sinks.policy  # routing and billing never see two policies


def test_a_config_that_fails_validation_publishes_nothing(tmp_path, redis_prefix):
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(base_config([tier("small", 1, ["http://a.test"])], redis_prefix)))
    state = GatewayState(load_config(path), str(path), classifier=PromptLengthClassifier())
    taken = state.services
    path.write_text("tiers: not a list\n")
    assert not state.reload() and state.services is taken
