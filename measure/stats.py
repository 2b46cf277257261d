"""Latency statistics: percentiles, per-window summaries and drift between windows."""
from __future__ import annotations


def percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


def latency_stats(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p95": None, "p99": None}
    s = sorted(values)
    return {q: round(percentile(s, int(q[1:])), 5) for q in ("p50", "p95", "p99")}


def streamed_ttfts(ok: list[dict]) -> list[float]:
    """TTFTs of successful answers; only streamed ones have a first token to time."""
    return [r["ttft"] for r in ok if "ttft" in r]


def drift(windows: list[dict]) -> dict:
    """Last window's percentile over the first's, per metric; None where either is missing."""
    out = {}
    for metric in ("ttft_s", "e2e_s"):
        for q in ("p50", "p99"):
            first, last = windows[0][metric][q], windows[-1][metric][q]
            out[f"{metric[:-2]}_{q}"] = round(last / first, 3) if first and last is not None else None
    return out


def latency_windows(results: list[dict], start_s: float, end_s: float, n: int) -> list[dict]:
    """Requests by start time into n equal windows of [start_s, end_s): counts and percentiles."""
    width = (end_s - start_s) / n
    windows = []
    for i in range(n):
        lo, hi = start_s + i * width, start_s + (i + 1) * width
        rows = [r for r in results if lo <= r["t"] < hi]
        ok = [r for r in rows if r.get("status") == 200]
        windows.append({"from_s": round(lo, 1), "to_s": round(hi, 1), "requests": len(rows),
                        "errors": len(rows) - len(ok),
                        "ttft_s": latency_stats(streamed_ttfts(ok)),
                        "e2e_s": latency_stats([r["e2e"] for r in ok])})
    return windows
