"""The nearest-outcome stage per tenant: a request reads its own tenant's outcomes and the shared
ones, never another tenant's, and the memory stays bounded however many tenants there are."""
from dataclasses import replace

import numpy as np
import pytest

from classifier.features import FEATURE_NAMES, extract_many
from classifier.outcome_fit import fit, remembered
from classifier.outcome_model import OutcomeModel, known_levels
from classifier.static_vectors import DIMS

KIND = [f"What is the sales tax in {s}?" for s in ("Ohio", "Texas", "Utah", "Maine", "Iowa", "Idaho", "Oregon",
                                                    "Nevada", "Kansas", "Alaska", "Georgia", "Vermont")]
OTHER = ["Say hello.", "Hi there!", "Name a fruit.", "What color is the sky?", "Tell me a joke.",
         "Which continent is Kenya in?", "Hello, how are you?", "Thanks, bye!"]
GAINED, KEPT = known_levels({1: False, 4: True}), known_levels({1: True, 4: True})


def _rows(texts, shipped):
    texts, numeric = extract_many([{"prompt": t} for t in texts])
    return texts, numeric.astype(np.float64), shipped.probabilities(texts, numeric).astype(np.float64)


def test_one_tenants_outcomes_never_move_another_tenants_neighbours(shipped):
    texts, numeric, probs = _rows(KIND + OTHER, shipped)
    b_known = np.stack([KEPT] * len(KIND) + [KEPT] * len(OTHER))  # B: its small tier answers all of it
    a_known = np.stack([GAINED] * len(KIND) + [KEPT] * len(OTHER))  # A: sales tax needs the top tier
    only_b = fit(numeric, probs, b_known, DIMS, owners=["B"] * len(texts))
    both = fit(np.vstack([numeric, numeric]), np.vstack([probs, probs]), np.vstack([b_known, a_known]), DIMS,
               owners=["B"] * len(texts) + ["A"] * len(texts))
    # the same fitted stages, so only the neighbours differ: B's requests read B's alone
    with_a = replace(only_b, memory=both.memory, tenant_memories=both.tenant_memories)
    probe_texts, probe, probe_probs = _rows(["What is the sales tax in Virginia?", "Say goodbye."], shipped)
    b_before = only_b.assess(probe, probe_probs, DIMS, probe_texts, "B")
    b_after = with_a.assess(probe, probe_probs, DIMS, probe_texts, "B")
    assert b_after.need == pytest.approx(b_before.need, abs=0) and b_after.weight == pytest.approx(b_before.weight)
    # A's own requests do read A's outcomes: the sales-tax kind gains from the top tier there
    a_view = with_a.assess(probe, probe_probs, DIMS, probe_texts, "A")
    assert a_view.need[0, 0] > b_after.need[0, 0] + 0.3
    # a tenant with no memory of its own (or none named) reads the shared memory, empty here
    for stranger in ("C", None):
        assert not with_a.assess(probe, probe_probs, DIMS, probe_texts, stranger).weight.any()


def test_the_operators_shared_outcomes_reach_every_tenant(shipped):
    texts, numeric, probs = _rows(KIND, shipped)
    model = fit(numeric, probs, np.stack([GAINED] * len(KIND)), DIMS, owners=[""] * len(texts))
    probe_texts, probe, probe_probs = _rows(["What is the sales tax in Virginia?"], shipped)
    for tenant in ("A", "B", None):
        assert model.assess(probe, probe_probs, DIMS, probe_texts, tenant).need_weight[0, 0] > 0


def test_the_memory_is_bounded_by_tenants_times_rows():
    rng = np.random.default_rng(3)
    owners = [f"t{i % 40}" for i in range(2000)] + [""] * 300
    vectors = rng.normal(size=(len(owners), DIMS))
    known = np.tile(GAINED, (len(owners), 1))
    shared, own = remembered(vectors, known, owners, capacity=100, tenant_rows=16, tenants=10)
    assert len(shared) == 100 and len(own) == 10 and all(len(m) == 16 for m in own.values())
    assert set(own) == {f"t{i}" for i in range(30, 40)}  # the tenants seen last keep theirs
    # each keeps its newest rows
    newest_t39 = [i for i, o in enumerate(owners) if o == "t39"][-16:]
    assert own["t39"].vectors == pytest.approx(vectors[newest_t39] / np.linalg.norm(vectors[newest_t39], axis=1,
                                                                                      keepdims=True), rel=1e-5)


def test_tenant_memories_survive_a_save_and_load(shipped, tmp_path):
    texts, numeric, probs = _rows(KIND + OTHER, shipped)
    known = np.stack([GAINED] * len(KIND) + [KEPT] * len(OTHER))
    model = fit(numeric, probs, known, DIMS, owners=["A"] * 10 + ["B"] * 10)
    model.save(tmp_path)
    again = OutcomeModel.load(tmp_path, len(FEATURE_NAMES), DIMS)
    assert {k: len(m) for k, m in again.tenant_memories.items()} == {"A": 10, "B": 10}
    for tenant in ("A", "B"):
        assert again.assess(numeric, probs, DIMS, texts, tenant).need == \
            pytest.approx(model.assess(numeric, probs, DIMS, texts, tenant).need)
