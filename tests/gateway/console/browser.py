"""What the console's browser tests share: Debian's Chromium under Playwright, and where the
screenshots go (test-output/console/, or $TIERGATE_TEST_OUTPUT/console/)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
OUTPUT = Path(os.environ.get("TIERGATE_TEST_OUTPUT", Path(__file__).resolve().parents[3] / "test-output")) / "console"


def launch(playwright):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `make setup` installs Debian's chromium for the browser tests",
                    pytrace=False)
    return playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
