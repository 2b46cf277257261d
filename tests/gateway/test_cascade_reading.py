"""What the cascade reads of the first answer: each chosen token's logprob with its best rival from
the top lists (chat entries or completions' token -> logprob objects), and what the first attempt
asks the worker for so that the rivals come back."""
from __future__ import annotations

import json

from classifier.cascade_confidence import TOP_LOGPROBS, answer_confidence
from gateway.api.handlers import build_request
from gateway.core.cascade import Confidence, whole_confidence
from gateway.core.upstream import PATHS, Ask
from tests.gateway.gw_helpers import base_config, tier
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import ScriptedTransport

# two tokens: the second's best rival is 0.2 below it, the narrowest margin of the answer
CHOSEN = [-0.1, -0.7]
RIVAL = [-2.0, -0.9]


def _chat(tops: bool) -> bytes:
    content = [{"token": f"t{i}", "logprob": lp, "bytes": None,
                "top_logprobs": [{"token": f"t{i}", "logprob": lp}, {"token": "r", "logprob": rv}] if tops else []}
               for i, (lp, rv) in enumerate(zip(CHOSEN, RIVAL))]
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "t0t1"},
                                    "logprobs": {"content": content}}]}).encode()


def test_a_chat_answer_is_scored_by_its_tokens_narrowest_margin_to_a_rival():
    assert whole_confidence(_chat(tops=True)) == answer_confidence(CHOSEN, [[c, r] for c, r in zip(CHOSEN, RIVAL)])
    assert abs(whole_confidence(_chat(tops=True)) - 0.2) < 1e-9


def test_completions_top_lists_are_read_from_their_token_objects():
    body = {"choices": [{"index": 0, "text": "t0t1", "logprobs": {
        "tokens": ["t0", "t1"], "token_logprobs": CHOSEN,
        "top_logprobs": [{"t0": CHOSEN[0], "r": RIVAL[0]}, {"t1": CHOSEN[1], "r": RIVAL[1]}]}}]}
    assert abs(whole_confidence(json.dumps(body).encode()) - 0.2) < 1e-9


def test_without_top_lists_the_chosen_logprobs_alone_bound_the_margin():
    assert whole_confidence(_chat(tops=False)) == answer_confidence(CHOSEN)
    assert whole_confidence(_chat(tops=False)) < whole_confidence(_chat(tops=True))  # -0.7 alone allows a close rival


def test_streamed_chunks_gather_per_choice_and_the_least_sure_choice_decides():
    confidence = Confidence()
    for i, (lp, rv) in enumerate(zip(CHOSEN, RIVAL)):
        entry = {"token": f"t{i}", "logprob": lp, "top_logprobs": [{"token": f"t{i}", "logprob": lp},
                                                                   {"token": "r", "logprob": rv}]}
        confidence.add({"choices": [{"index": 0, "delta": {"content": f"t{i}"}, "logprobs": {"content": [entry]}},
                                    {"index": 1, "delta": {"content": "x"}, "logprobs": {"content": [
                                        {"token": "x", "logprob": -0.01, "top_logprobs": [
                                            {"token": "x", "logprob": -0.01}, {"token": "y", "logprob": -6.0}]}]}}]})
    assert confidence.tokens == 4 and abs(confidence.score() - 0.2) < 1e-9
    assert whole_confidence(b'{"choices": [{"index": 0, "logprobs": null}]}') is None


def test_the_first_attempt_asks_for_the_rivals_unless_the_client_asked_for_logprobs(redis_prefix):
    small = {**tier("small", 1, ["http://small.test"]), "capabilities": {"logprobs": True}}
    services = services_for(base_config([small], redis_prefix), ScriptedTransport(lambda sent: None))

    def asked(path: str, **body) -> dict:
        request = build_request(services, chat_call(services, None, **body))
        ask = Ask(request.id, request.route, PATHS[path], request.body, False, request.max_tokens, logprobs=True)
        return json.loads(ask.body_for(request.route.tier))

    chat = asked("chat")
    assert (chat["logprobs"], chat["top_logprobs"]) == (True, TOP_LOGPROBS)
    assert asked("completion")["logprobs"] == TOP_LOGPROBS  # completions: the top list's length
    own = asked("chat", logprobs=True, top_logprobs=1)
    assert (own["logprobs"], own["top_logprobs"]) == (True, 1)  # the client's answer stays as it asked
