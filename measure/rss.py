"""Resident memory of process trees, read straight from /proc (Linux; no psutil needed):
finding a tree's processes, naming them from their command lines, sampling VmRSS, and the
least-squares growth rate of a sampled series."""
from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
JUDGED_ROLES = ("gateway", "worker")  # the soak's verdict is about our processes, not fakes or Redis


def rss_kb(pid: int) -> int | None:
    """VmRSS in kB; None once the process is gone (or a zombie, which has no VmRSS line)."""
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None


def alive(pid: int) -> bool:
    return rss_kb(pid) is not None


def _ppid(pid: str) -> int | None:
    try:
        stat = (PROC / pid / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command name (field 2) may hold spaces and parentheses: parse after the last ")"
    return int(stat[stat.rindex(")") + 2:].split()[1])


def tree(root: int) -> list[int]:
    """`root` and all its descendants, parents first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir(PROC):
        if entry.isdigit() and (parent := _ppid(entry)) is not None:
            children.setdefault(parent, []).append(int(entry))
    found, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        if alive(pid):
            found.append(pid)
            queue += sorted(children.get(pid, []))
    return found


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def describe(pid: int) -> dict:
    """{"pid", "role", "label"} from the command line: what a process is, for the report."""
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except (FileNotFoundError, ProcessLookupError):
        argv = []
    module, port = _flag(argv, "-m"), _flag(argv, "--port")
    known = {"backends.worker": ("worker", f"worker:{port}"),
             "launcher.fake_upstream": ("upstream", f"upstream:{port}"),
             "gateway.process": ("gateway", f"gateway:{port}"),
             "gateway": ("gateway", f"gateway-supervisor:{port}"),
             "launcher": ("launcher", "stack-launcher")}
    if module in known:
        role, label = known[module]
    else:
        name = Path(argv[0]).name if argv else "?"
        role = label = "redis" if name.startswith("redis-server") else name
    out = {"pid": pid, "role": role, "label": label}
    if model := _flag(argv, "--model"):
        out["model"] = model
    return out


def slope_pct_per_10min(series: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, as % of the series' mean per 10 minutes."""
    if len(series) < 3:
        return None
    n = len(series)
    mean_t = sum(t for t, _ in series) / n
    mean_v = sum(v for _, v in series) / n
    var_t = sum((t - mean_t) ** 2 for t, _ in series)
    if var_t == 0 or mean_v == 0:
        return None
    slope = sum((t - mean_t) * (v - mean_v) for t, v in series) / var_t  # value per second
    return round(slope * 600 / mean_v * 100, 3)


def _mb(kb: int) -> float:
    return round(kb / 1024, 1)


def summarise(info: dict, series: list[tuple[float, int]], warmup_s: float) -> dict:
    """One process's figures: RSS (MB) at start, end of warm-up, end and peak; slope after warm-up."""
    after = [(t, kb) for t, kb in series if t >= warmup_s]
    before = [kb for t, kb in series if t < warmup_s]
    out = dict(info, samples=len(series), judged=info["role"] in JUDGED_ROLES)
    if series:
        warm = before[-1] if before else series[0][1]
        out.update(rss_mb_start=_mb(series[0][1]), rss_mb_warm=_mb(warm), rss_mb_end=_mb(series[-1][1]),
                   rss_mb_peak=_mb(max(kb for _, kb in series)), growth_mb_after_warmup=_mb(series[-1][1] - warm),
                   slope_pct_per_10min=slope_pct_per_10min(after))
    return out
