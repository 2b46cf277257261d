"""The console in a real browser (Playwright driving Debian's Chromium) against the real stack:
an inference worker, a gateway process with tenants, the shared Redis. Mixed traffic goes
through the openai SDK; then every view is opened, its numbers are checked against /metrics
and /v1/usage, a routing explanation is run from the explorer, and each view is saved as a
screenshot under test-output/console/ (or $TIERGATE_TEST_OUTPUT/console/)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

from policies.keys import hash_key
from tests.gateway.console.browser import OUTPUT, launch
from tests.gateway.e2e_stack import e2e_stack, tier
from tests.support import wait_until
from tests.support.metrics import metric, scrape
from tests.support.stack import label

ADMIN, TENANT_KEY = "sk-browser-admin", "sk-browser-acme"
HARD_PROMPT = "Prove that there are infinitely many primes, then design a distributed consensus protocol."


@pytest.fixture(scope="module")
def stack(tmp_path_factory, shared_worker):
    tmp = tmp_path_factory.mktemp("console-stack")
    sections = {
        "policy": {"admin_key_sha256": hash_key(ADMIN), "usage_log": {"dir": str(tmp / "logs")}},
        "tenants": {"acme": {"keys": [{"id": "k1", "sha256": hash_key(TENANT_KEY)}]}},
        "quality": {"sampling_rate": 1.0, "reference_max_tokens": 4},  # every small-tier answer is judged
    }
    with e2e_stack(tmp, lambda urls: [{**tier("small", 1, urls), "price_per_mtok": {"input": 0.1, "output": 0.2}},
                                      {**tier("large", 4, urls), "price_per_mtok": {"input": 3.0, "output": 6.0}}],
                   n_workers=0, running_workers=(shared_worker,), **sections) as running:
        yield running


def _send_mixed_traffic(url: str) -> int:
    client = openai.OpenAI(base_url=url + "/v1", api_key=TENANT_KEY, max_retries=0, timeout=120)
    ask = lambda model, text, **kw: client.chat.completions.create(  # noqa: E731
        model=model, messages=[{"role": "user", "content": text}], max_tokens=4, temperature=0, **kw)
    ask("auto", "hi, how are you?")
    ask("auto", HARD_PROMPT)
    ask("small", "What is the capital of France?")
    for _ in ask("large", "Name a colour.", stream=True, stream_options={"include_usage": True}):
        pass
    client.completions.create(model="auto", prompt="Once upon a time", max_tokens=4)
    with pytest.raises(openai.BadRequestError):
        ask("auto", "x", n=0)
    return 5


def _fetch(url: str, body: dict | None = None, key: str | None = None) -> str:
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {key}"} if key else {})})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def _judged(url: str) -> int:
    summary = json.loads(_fetch(url + "/v1/quality", key=ADMIN))
    return sum(t["recent"]["samples"] for t in summary["tiers"].values())


def _text(page, selector: str) -> str:
    return page.text_content(selector).strip()


def _open(page, url: str, view: str) -> None:
    page.goto(f"{url}/console#{view}")
    page.wait_for_selector(f"body[data-loaded={view}]", timeout=30_000)


def test_console_views_show_the_gateways_own_numbers(stack):
    from playwright.sync_api import sync_playwright

    served = _send_mixed_traffic(stack.url)
    small = int(metric(scrape(stack.url, key=ADMIN), "tiergate_routed_requests_total", default=0.0, tier="small"))
    assert small >= 1  # "small" was asked for by name once
    wait_until(lambda: _judged(stack.url) == small, timeout_s=120)  # every small answer re-asked and judged
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            for key in (None, TENANT_KEY):  # without the admin key: 401 (a browser would ask for it)
                with pytest.raises(urllib.error.HTTPError) as refused:
                    _fetch(stack.url + "/console", key=key)
                assert refused.value.code == 401
            context = browser.new_context(http_credentials={"username": "admin", "password": ADMIN},
                                          viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            # Overview: read the page first, then /metrics (unmetered) and /v1/usage (metered, so last).
            _open(page, stack.url, "overview")
            page.wait_for_function("document.querySelectorAll('#tier-mix tbody tr').length === 2")
            shown = {k: _text(page, f"#kpi-{k}") for k in ("requests", "tokens", "spend", "saved", "ledger")}
            mix = {row[0]: row for row in page.eval_on_selector_all(
                "#tier-mix tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")}
            page.screenshot(path=str(OUTPUT / "overview.png"), full_page=True)
            found = scrape(stack.url, timeout_s=30, key=ADMIN)  # per-tenant series: the admin key's
            spend = metric(found, "tiergate_cost_usd_total")
            assert shown["requests"] == str(int(metric(found, "tiergate_requests_total")))
            assert shown["spend"] == f"{spend:.6f}" and spend > 0
            assert shown["saved"] == f"{metric(found, 'tiergate_cost_saved_usd_total', default=0.0):.6f}"
            assert shown["tokens"] == str(int(metric(found, "tiergate_tokens_total")))
            routed = {t: int(metric(found, "tiergate_routed_requests_total", default=0.0, tier=t)) for t in mix}
            assert set(mix) == {"small", "large"} and {t: int(row[1]) for t, row in mix.items()} == routed
            assert sum(int(row[1]) for row in mix.values()) == served
            usage = json.loads(_fetch(stack.url + "/v1/usage?days=1", key=ADMIN))
            ledger = sum(day["spend_micro_usd"] for entry in usage["data"] for day in entry["days"]) / 1e6
            assert shown["ledger"] == f"{ledger:.6f}" == shown["spend"]

            # Routing: the recent table holds every served request; the explorer agrees with /v1/route.
            _open(page, stack.url, "routing")
            page.wait_for_function(f"document.querySelectorAll('#recent tbody tr').length === {served}")
            first = page.eval_on_selector("#recent tbody tr", "r => [...r.cells].map(c => c.textContent)")
            page.click("#recent tbody tr")  # no prompt logged: the recorded decision is shown
            assert _text(page, "#explain-tier") == first[3] and _text(page, "#explain-routed-by") == first[4]
            page.fill("#explain-prompt", HARD_PROMPT)
            page.click("#explain-go")
            page.wait_for_selector("#explain-result:not([hidden])")
            expected = json.loads(_fetch(stack.url + "/v1/route", key=ADMIN, body={
                "model": "auto", "messages": [{"role": "user", "content": HARD_PROMPT}]}))
            assert _text(page, "#explain-tier") == expected["tier"]
            assert _text(page, "#explain-routed-by") == expected["routed_by"] == "classifier"
            bars = page.eval_on_selector_all("#explain-scores .bar span", "spans => spans.map(s => s.textContent)")
            assert [b.split(")")[0] for b in bars] == ["P(level ≥ 2", "P(level ≥ 3", "P(level ≥ 4"]
            assert all(" vs threshold " in b for b in bars)  # P(level >= k) against its effective threshold
            page.screenshot(path=str(OUTPUT / "routing.png"), full_page=True)
            assert HARD_PROMPT not in page.text_content("#recent")  # prompt logging is off by default

            _open(page, stack.url, "quality")
            assert _text(page, "#quality-shift") == "none"
            assert _text(page, "#quality-samples") == str(small)
            assert page.locator("#chart-similarity canvas").count() == 1
            page.screenshot(path=str(OUTPUT / "quality.png"), full_page=True)

            # Workers: the real worker's own /metrics, read through the gateway.
            _open(page, stack.url, "workers")
            cells = page.eval_on_selector_all("#workers tbody tr td", "cells => cells.map(c => c.textContent)")
            assert cells[0] == label(stack.worker_urls[0]) and cells[1] == "small, large" and cells[2] == "up"
            assert cells[4] == "0" and cells[5] == "0" and cells[6].endswith("%")  # idle: nothing queued or running
            assert cells[8] != "–"  # TTFT percentiles from the worker's histogram
            page.screenshot(path=str(OUTPUT / "workers.png"), full_page=True)
            assert errors == []
        finally:
            browser.close()
    for view in ("overview", "routing", "quality", "workers"):
        assert (OUTPUT / f"{view}.png").stat().st_size > 10_000
