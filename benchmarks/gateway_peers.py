"""Peer gateways to compare against; each installs into its own venv under .cache/ on first use."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LITELLM_KEY = "sk-tiergate-bench"


def _litellm_venv(root: Path) -> Path:
    venv = root / ".cache" / "litellm-venv"
    litellm = venv / "bin" / "litellm"
    if not litellm.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "litellm[proxy]"], check=True)
    return litellm


def start_litellm(upstream: str, port: int, workdir: Path, root: Path) -> tuple[subprocess.Popen, dict]:
    """LiteLLM's proxy in front of the same upstream, model 'auto' mapped to it (no classification)."""
    litellm = _litellm_venv(root)
    config = workdir / "litellm.yaml"
    config.write_text(json.dumps({
        "model_list": [{"model_name": "auto", "litellm_params": {
            "model": "openai/bench-model", "api_base": upstream + "/v1", "api_key": "unused"}}],
        "general_settings": {"master_key": LITELLM_KEY},
        "litellm_settings": {"telemetry": False},
    }))
    proc = subprocess.Popen([str(litellm), "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
                             "--num_workers", "1"], cwd=workdir, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    return proc, {"Authorization": f"Bearer {LITELLM_KEY}"}
