"""Reading labelled JSONL: one `{"messages": [...]|"prompt": "...", "tier": 1..4}` per line.

`--data` may name a folder with the split files or one JSONL file. Feedback files (e.g.
from the quality monitor's future `export-feedback`) share the row format and are simply
appended to the training rows.
"""
from __future__ import annotations

import json
from pathlib import Path

PACKAGED_DATA_DIR = Path(__file__).resolve().parent / "data"
SPLITS = ("train", "validation", "test", "heldout")


def _check(row: dict, where: str, need_label: bool) -> dict:
    has_messages = isinstance(row.get("messages"), list) and all(
        isinstance(m, dict) and isinstance(m.get("content", ""), str) for m in row["messages"])
    if not has_messages and not isinstance(row.get("prompt"), str):
        raise ValueError(f"{where}: needs 'messages' (list of {{role, content}}) or 'prompt' (string)")
    if need_label and row.get("tier") not in (1, 2, 3, 4):
        raise ValueError(f"{where}: 'tier' must be an integer 1..4, got {row.get('tier')!r}")
    return row


def read_jsonl(path: str | Path, need_label: bool = True) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
                rows.append(_check(row, f"{path}:{n}", need_label))
    return rows


def load_splits(data: str | Path | None = None) -> dict[str, list[dict]]:
    """Split name -> rows. A folder gives its split files; a single file is all 'train'."""
    path = Path(data) if data else PACKAGED_DATA_DIR
    if path.is_file():
        return {"train": read_jsonl(path)}
    found = {name: read_jsonl(path / f"{name}.jsonl") for name in SPLITS if (path / f"{name}.jsonl").exists()}
    if "train" not in found:
        raise ValueError(f"{path}: no train.jsonl")
    return found
