"""The console's "Tenants & keys" view in a real browser (Playwright driving Debian's Chromium)
against a gateway process with an admin key and a fake upstream: a tenant created with a budget
and tags, a key created (its secret shown once, and it serves), rotated (the new secret serves),
revoked (refused), every step in the audit table. The admin API takes the console's Basic
credentials only with its X-Tiergate-Console header."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest

from policies.keys import hash_key
from tests.gateway.console.browser import OUTPUT, launch
from tests.support import wait_until
from tests.support.kinds import starts_processes
from tests.support.stack import Stack

ADMIN = "sk-console-keys-admin"
pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
@starts_processes
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console-keys")
    with Stack(tmp, "conkeys") as running:
        upstream, = running.start_upstreams(1)
        running.start_gateways({
            "tiers": [{"name": "small", "level": 1, "model": "m", "price_per_mtok": {"input": 1, "output": 1},
                       "workers": [{"url": upstream}]}],
            "policy": {"admin_key_sha256": hash_key(ADMIN), "usage_log": {"dir": str(tmp / "logs")}}})
        yield running


def _chat(url: str, key: str) -> int:
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(
        {"model": "small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


def _basic(path: str, url: str, console: bool) -> int:
    token = base64.b64encode(f"admin:{ADMIN}".encode()).decode()
    headers = {"Authorization": f"Basic {token}", **({"X-Tiergate-Console": "1"} if console else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, headers=headers), timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


def _rows(page, table: str) -> list[list[str]]:
    return page.eval_on_selector_all(f"#{table} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")


def test_the_console_creates_rotates_and_revokes_keys(stack):
    from playwright.sync_api import sync_playwright

    assert _basic("/admin/keys", stack.url, console=False) == 401  # Basic alone: not for the admin API
    assert _basic("/admin/keys", stack.url, console=True) == 200
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            context = browser.new_context(http_credentials={"username": "admin", "password": ADMIN},
                                          viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{stack.url}/console#keys")
            page.wait_for_selector("body[data-loaded=keys]", timeout=30_000)

            page.fill("#tenant-name", "team-web")
            page.fill("#tenant-policy", '{"budgets": {"daily_usd": {"hard": 5}}, "allowed_tags": ["search"]}')
            page.click("#tenant-save")
            page.wait_for_function("[...document.querySelectorAll('#tenants tbody tr')].some(r => r.cells[0].textContent === 'team-web')")
            tenant = next(r for r in _rows(page, "tenants") if r[0] == "team-web")
            assert tenant[1] == "api" and json.loads(tenant[2]) == {"daily_usd": {"hard": 5}}
            assert tenant[3] == "search"

            page.select_option("#key-tenant", "team-web")
            page.fill("#key-owner", "ana")
            page.fill("#key-budgets", '{"weekly_usd": {"hard": 20}}')
            page.click("#key-create")
            page.wait_for_selector("#key-secret-box:not([hidden])")
            secret, key_id = page.text_content("#key-secret"), page.text_content("#key-secret-id")
            assert secret.startswith("sk-tg-") and _chat(stack.url, secret) == 200
            page.wait_for_selector(f"#keys tbody tr[data-key-id='{key_id}']")
            row = next(r for r in _rows(page, "keys") if r[0] == key_id)
            assert row[1:4] == ["team-web", secret[:10] + "…", "ana"] and row[5] == "active"
            assert json.loads(row[6]) == {"weekly_usd": {"hard": 20}}
            assert secret not in page.text_content("#keys")  # listings never show a secret

            page.click(f"#keys tbody tr[data-key-id='{key_id}'] button:text('Rotate')")
            page.wait_for_function(f"document.querySelector('#key-secret').textContent !== {json.dumps(secret)}")
            rotated = page.text_content("#key-secret")
            assert _chat(stack.url, rotated) == 200 and _chat(stack.url, secret) == 200  # old one: in its grace

            page.click(f"#keys tbody tr[data-key-id='{key_id}'] button:text('Revoke')")
            page.wait_for_function(f"[...document.querySelectorAll('#keys tbody tr')].some(r => r.cells[0].textContent === '{key_id}' && r.cells[5].textContent === 'revoked')")
            wait_until(lambda: _chat(stack.url, rotated) == 401, timeout_s=10)
            actions = [r[2] for r in _rows(page, "audit")]
            assert actions[:4] == ["key.revoke", "key.rotate", "key.create", "tenant.create"]
            page.screenshot(path=str(OUTPUT / "keys.png"), full_page=True)
            assert errors == []
        finally:
            browser.close()
