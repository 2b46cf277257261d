"""The scheduler replay of benchmarks/priority_sim.py on known step costs, and the JSON the
priority benchmark reads its goals from."""
import json
from types import SimpleNamespace

from benchmarks.priority import summary
from benchmarks.priority_batch import batch_jsonl
from benchmarks.priority_sim import Sim, parse_args

PROMPTS = [[1, 2, 3] * 10 + [i] for i in range(50)]  # stands in for the tokenized chat prompts


def _sim(rate: float, lanes: int, cost, *flags: str) -> dict:
    args = parse_args(["--duration", "60", *flags])
    return Sim(PROMPTS, cost, rate, lanes, args).run(args.duration)


def test_batch_alone_makes_one_token_per_lane_per_step():
    assert _sim(0, 4, (0.125, 0.0, 0.0))["batch_tok_s"] == 32.0  # 0.125: exact in binary


def test_beside_long_batch_prompts_an_interactive_request_waits_for_at_most_a_share_of_one():
    cost = (0.05, 0.0, 0.001)  # a 512-token batch chunk: 0.56 s
    capped = _sim(1.0, 4, cost, "--batch-prompt-tokens", "2000")
    uncapped = _sim(1.0, 4, cost, "--batch-prompt-tokens", "2000", "--batch-prefill-chunk", "0")
    # the step it arrives during (<= 64 batch prompt tokens), then its own prompt's step alone
    assert capped["ttft_p99_s"] <= 2 * 0.05 + 0.064 + 0.032
    assert uncapped["ttft_p99_s"] > 0.5


def test_goals_are_met_only_within_both_bounds_and_without_errors():
    alone, beside = {"ttft_p50_s": 0.1, "ttft_p99_s": 0.2, "errors": 0, "requests": 60}, \
        {"ttft_p50_s": 0.12, "ttft_p99_s": 0.28, "errors": 0, "requests": 200}
    batch_alone = {"completion_tokens": 1000, "drain_s": 10.0, "errors": 0}
    batch_beside = {"completion_tokens": 1000, "drain_s": 13.0, "errors": 0}
    args = SimpleNamespace(config="c", tier="medium", batch_via="direct", batch_size=500, batch_max_tokens=32,
                           batch_concurrency=8, rate=1.0, max_tokens=32)
    out = summary(args, alone, beside, batch_alone, batch_beside)
    assert (out["ttft_p99_ratio"], out["batch_throughput_ratio"], out["goals_met"]) == (1.4, 0.769, True)
    assert not summary(args, alone, {**beside, "ttft_p99_s": 0.32}, batch_alone, batch_beside)["goals_met"]
    assert not summary(args, alone, beside, batch_alone, {**batch_beside, "drain_s": 15.0})["goals_met"]
    assert not summary(args, alone, beside, batch_alone, {**batch_beside, "errors": 1})["goals_met"]


def test_batch_lines_are_openai_batch_requests():
    lines = [json.loads(line) for line in batch_jsonl("medium", 3, 16).decode().splitlines()]
    assert [line["custom_id"] for line in lines] == ["line-0", "line-1", "line-2"]
    assert all(line["method"] == "POST" and line["url"] == "/v1/chat/completions" for line in lines)
    assert all(line["body"]["model"] == "medium" and line["body"]["max_tokens"] == 16
               and line["body"]["messages"][0]["role"] == "user" and "stream" not in line["body"] for line in lines)
