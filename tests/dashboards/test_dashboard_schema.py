"""The dashboard files are importable Grafana dashboards, in sync with their builders, and cover
the panels issue 8 asks for; the provisioning files and the scrape config are valid."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.dashboards.dash_helpers import ROOT, dashboards
from dashboards.generate import main as generate
from launcher.prometheus import main as write_scrape_config
from dashboards.promql import dashboard_exprs, metric_names

DS_VARIABLE = "${datasource}"
PANEL_TYPES = {"timeseries", "stat", "bargauge", "table", "heatmap", "row"}
ALL = dashboards()


def _walk(node, path="$"):
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key, value
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}[{i}]")


def test_three_dashboards_with_unique_uids_and_titles():
    assert set(ALL) == {"tiergate-cost.json", "tiergate-latency.json", "tiergate-quality.json"}
    uids = [d["uid"] for d in ALL.values()]
    titles = [d["title"] for d in ALL.values()]
    assert len(set(uids)) == 3 and len(set(titles)) == 3
    assert all(0 < len(uid) <= 40 for uid in uids)  # Grafana's uid limit


@pytest.mark.parametrize("name", sorted(ALL))
def test_grafana_schema(name):
    d = ALL[name]
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 36
    assert d["title"] and d["uid"] and "id" not in d  # no instance id: import creates one
    variables = d["templating"]["list"]
    ds = [v for v in variables if v["name"] == "datasource"]
    assert len(ds) == 1 and ds[0]["type"] == "datasource" and ds[0]["query"] == "prometheus"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 6
    for panel in d["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["type"]
        assert panel["title"] and panel["description"]
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in "xywh") and grid["x"] + grid["w"] <= 24
        assert panel["datasource"] == {"type": "prometheus", "uid": DS_VARIABLE}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        for t in panel["targets"]:
            assert t["datasource"]["uid"] == DS_VARIABLE and t["expr"].strip()


@pytest.mark.parametrize("name", sorted(ALL))
def test_no_hard_coded_datasource_uid(name):
    for path, key, value in _walk(ALL[name]):
        if key == "datasource" and isinstance(value, dict) and value.get("type") != "grafana":
            assert value.get("uid") == DS_VARIABLE, path
        if key == "datasource" and isinstance(value, str):
            assert value == DS_VARIABLE, path


def test_every_query_uses_only_known_metric_prefixes():
    for name, d in ALL.items():
        for where, expr in dashboard_exprs(d):
            names = metric_names(expr)
            assert names, f"{name} {where}: no metric found in {expr!r}"
            assert all(n.startswith("tiergate_") for n in names), (name, where, names)


# Issue 8's panel list -> (dashboard, metric a panel must query, words its title must contain).
REQUIRED = [
    ("cost", "tiergate_cost_usd_total", "spend per tenant"), ("cost", "tiergate_cost_usd_total", "spend per tier"),
    ("cost", "tiergate_cost_saved_usd_total", "saved vs all-top-tier"), ("cost", "tiergate_cost_top_tier_usd_total", "(%)"),
    ("cost", "tiergate_routed_requests_total", "cost per 1k requests"), ("cost", "tiergate_cost_usd_total", "top tenants"),
    ("cost", "tiergate_tenant_budget_usd", "budget burn"), ("cost", "tiergate_routed_requests_total", "tier distribution"),
    ("cost", "tiergate_routed_requests_total", "routing reason"),
    ("latency", "tiergate_ttft_seconds_bucket", "first token per tier"),
    ("latency", "tiergate_time_per_output_token_seconds_bucket", "per output token"),
    ("latency", "tiergate_request_duration_seconds_bucket", "end-to-end per tier"),
    ("latency", "tiergate_worker_time_to_first_token_seconds_bucket", "worker"),
    ("latency", "tiergate_worker_inter_token_latency_seconds_bucket", "worker"),
    ("latency", "tiergate_worker_e2e_request_latency_seconds_bucket", "worker"),
    ("latency", "tiergate_worker_num_requests_waiting", "queue depth"),
    ("latency", "tiergate_worker_num_requests_running", "running sequences"),
    ("latency", "tiergate_worker_kv_cache_usage_ratio", "kv-cache"),
    ("latency", "tiergate_worker_prefix_cache_hits_total", "prefix-cache hit rate"),
    ("latency", "tiergate_affinity_total", "affinity hit rate"),
    ("latency", "tiergate_worker_spec_accepted_tokens_total", "speculative"),
    ("quality", "tiergate_quality_samples_total", "failure rate per tier"),
    ("quality", "tiergate_quality_similarity_bucket", "similarity distribution"),
    ("quality", "tiergate_classifier_predictions_total", "classifier tier mix"),
]


@pytest.mark.parametrize("short, metric, words", REQUIRED)
def test_required_panel_exists(short, metric, words):
    d = ALL[f"tiergate-{short}.json"]
    matching = [p["title"] for p in d["panels"] if words in p["title"].lower()
                and any(metric in metric_names(t["expr"]) for t in p["targets"])]
    assert matching, f"{short}: no panel titled '...{words}...' queries {metric}"


def test_threshold_changes_are_annotations():
    annotations = [a for a in ALL["tiergate-quality.json"]["annotations"]["list"] if a.get("expr")]
    assert any("tiergate_quality_threshold_changes_total" in metric_names(a["expr"]) for a in annotations)
    assert all(a["datasource"]["uid"] == DS_VARIABLE for a in annotations)


def test_json_files_match_their_builders():
    assert generate(["--check"]) == 0, "run `python -m dashboards.generate` and commit the result"


def test_scrape_config_matches_the_default_stack_config():
    assert write_scrape_config(["--check"]) == 0, "run `python -m launcher.prometheus` and commit the result"


def test_provisioning_files():
    folder = ROOT / "dashboards" / "provisioning"
    sources = yaml.safe_load((folder / "datasources" / "tiergate-prometheus.yaml").read_text())
    assert sources["apiVersion"] == 1 and sources["datasources"][0]["type"] == "prometheus"
    providers = yaml.safe_load((folder / "dashboards" / "tiergate.yaml").read_text())
    provider = providers["providers"][0]
    assert providers["apiVersion"] == 1 and provider["type"] == "file" and provider["options"]["path"]


def test_scrape_config_targets_the_default_stack():
    doc = yaml.safe_load((ROOT / "dashboards" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job["static_configs"][0]["targets"] for job in doc["scrape_configs"]}
    assert jobs["tiergate-gateway"] == ["127.0.0.1:8080"]
    assert jobs["tiergate-workers"] == ["127.0.0.1:8101", "127.0.0.1:8102", "127.0.0.1:8103", "127.0.0.1:8104"]
    promtool = shutil.which("promtool")  # shipped with the Debian prometheus package (`make setup`)
    assert promtool, "promtool is not installed: run `make setup`"
    done = subprocess.run([promtool, "check", "config", str(ROOT / "dashboards" / "prometheus.yml")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("expr, expected", [
    ('sum by (tier, le) (rate(a_bucket{tier=~"$tier"}[$__rate_interval]))', {"a_bucket"}),
    ('x_total{l="}{ by (y)"} / on (tenant) group_left (z) y_total offset 1d', {"x_total", "y_total"}),
    ('100 * sum(increase(a[5m:1m])) and bool 1e3 > b', {"a", "b"}),
    ('histogram_quantile(0.99, sum without (pod) (rate(c_bucket[1m])))', {"c_bucket"}),
])
def test_metric_name_extraction(expr, expected):
    assert metric_names(expr) == expected
