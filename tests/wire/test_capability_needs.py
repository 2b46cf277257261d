"""wire/capabilities.py: what a request body needs, and what a tier's stated card means."""
from __future__ import annotations

from wire.capabilities import Capabilities, Needs, from_models_card, intersect, needs_of

CHAT = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
TOOL = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def features(**extra) -> tuple[str, ...]:
    return needs_of({**CHAT, **extra}, 10, 256).features


def test_each_parameter_maps_to_its_capability_and_names_itself():
    assert features() == ()
    assert features(tools=TOOL) == ("tools",)
    assert features(tools=TOOL, tool_choice="none") == ()  # tools listed but never to be called
    assert features(tools=[]) == ()
    assert features(response_format={"type": "text"}) == ()
    for kind in ("json_object", "json_schema"):
        assert features(response_format={"type": kind}) == ("structured_outputs",)
    assert features(logprobs=False) == () and features(logprobs=True) == ("logprobs",)
    assert features(n=1) == () and features(n=3) == ("n",)
    needs = needs_of({**CHAT, "tools": TOOL, "top_logprobs": 2, "logprobs": True, "n": 2}, 10, 256)
    assert needs.features == ("tools", "logprobs", "n")
    assert [needs.param_for(f) for f in needs.features] == ["tools", "top_logprobs", "n"]
    # completions: logprobs is a count, and 0 still asks for the sampled token's logprob
    completion = needs_of({"model": "auto", "prompt": "x", "logprobs": 0}, 1, 16)
    assert completion.features == ("logprobs",) and completion.param_for("max_context_tokens") == "prompt"


def test_context_need_is_the_prompt_plus_what_it_may_generate():
    assert needs_of(CHAT, 100, 256).context_tokens == 356
    assert needs_of({**CHAT, "tools": TOOL}, 100, 10).context_tokens == 110


def test_unstated_means_not_capable_but_an_unstated_window_is_not_checked():
    needs = Needs(("tools",), ("tools",), 10_000)
    assert Capabilities().lacks(needs) == ["tools"]
    assert Capabilities(tools=False).lacks(needs) == ["tools"]
    assert Capabilities(tools=True).lacks(needs) == []
    assert Capabilities(tools=True, max_context_tokens=8192).lacks(needs) == ["max_context_tokens"]


def test_config_wins_field_by_field_and_a_tier_can_do_what_all_its_workers_can():
    learned = Capabilities(tools=True, logprobs=True, max_context_tokens=2048)
    stated = Capabilities(tools=False, max_context_tokens=8192)
    assert stated.over(learned) == Capabilities(tools=False, logprobs=True, max_context_tokens=8192)
    both = intersect([learned, Capabilities(tools=True, max_context_tokens=1024)])
    assert both == Capabilities(tools=True, max_context_tokens=1024)
    assert intersect([]) == Capabilities()


def test_models_card_is_read_leniently_and_a_bad_one_states_nothing():
    card = {"data": [{"id": "m", "capabilities": {"tools": True, "structured_outputs": True, "logprobs": False,
                                                  "n": True, "embeddings": False, "max_context_tokens": 4096}}]}
    assert from_models_card(card) == Capabilities(True, True, False, True, False, 4096)
    assert from_models_card({"data": [{"id": "m"}]}) == Capabilities()
    more = {"data": [{"capabilities": {"embeddings": True, "dimensions": 384, "chat": False}}]}
    assert from_models_card(more) == Capabilities(embeddings=True)  # what routing does not read is ignored
    assert from_models_card({"data": [{"capabilities": {"tools": "yes"}}]}) == Capabilities()
    assert from_models_card(["not", "a", "card"]) == Capabilities()
