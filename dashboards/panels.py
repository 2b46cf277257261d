"""Small builders for Grafana dashboard JSON (schemaVersion 39, Grafana 10/11).

Every panel and query names the datasource as `${datasource}`, a dashboard variable of type
datasource, so a dashboard imports into any Grafana whatever its Prometheus datasource's UID.
The builders only spell out what differs between panels; layout is a simple flow of rows.
"""
from __future__ import annotations

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
RATE = "$__rate_interval"
RANGE = "$__range"


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> dict:
    out = {"refId": ref, "datasource": DATASOURCE, "expr": expr, "legendFormat": legend or "__auto",
           "range": not instant, "instant": instant, "editorMode": "code"}
    if instant:
        out["format"] = "table"
    return out


def targets(*pairs: tuple[str, str], instant: bool = False) -> list[dict]:
    """(expr, legend) pairs with refIds A, B, C, ..."""
    return [target(expr, legend, chr(ord("A") + i), instant) for i, (expr, legend) in enumerate(pairs)]


def quantile_targets(metric: str, by: str, selector: str = "") -> list[dict]:
    """p50/p95/p99 of a Prometheus histogram, one series per value of `by`."""
    pairs = [(f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{selector}[{RATE}])))",
              f"{name} {{{{{by}}}}}") for name, q in QUANTILES]
    return targets(*pairs)


def _panel(kind: str, title: str, description: str, queries: list[dict], unit: str, size: tuple[int, int],
           options: dict | None = None, custom: dict | None = None, **defaults) -> dict:
    field_defaults = {"unit": unit, **defaults}
    if custom:
        field_defaults["custom"] = custom
    return {"type": kind, "title": title, "description": description, "datasource": DATASOURCE,
            "targets": queries, "fieldConfig": {"defaults": field_defaults, "overrides": []},
            "options": options or {}, "_size": size}


def timeseries(title: str, description: str, queries: list[dict], unit: str = "short", *,
               stack: str | None = None, size=(12, 8), **defaults) -> dict:
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if not stack else 60,
              "showPoints": "never", "spanNulls": False,
              "stacking": {"mode": stack or "none", "group": "A"}}
    options = {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max", "lastNotNull"]},
               "tooltip": {"mode": "multi", "sort": "desc"}}
    return _panel("timeseries", title, description, queries, unit, size, options, custom, **defaults)


def stat(title: str, description: str, queries: list[dict], unit: str = "short", *, size=(6, 4),
         decimals: int | None = None) -> dict:
    options = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
               "colorMode": "value", "graphMode": "none", "textMode": "auto", "justifyMode": "auto"}
    extra = {"decimals": decimals} if decimals is not None else {}
    return _panel("stat", title, description, queries, unit, size, options, **extra)


def bargauge(title: str, description: str, queries: list[dict], unit: str = "short", *, size=(12, 8),
             max_value: float | None = None, thresholds: list[tuple[float | None, str]] | None = None) -> dict:
    options = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
               "orientation": "horizontal", "displayMode": "gradient", "showUnfilled": True}
    extra = {}
    if max_value is not None:
        extra["max"], extra["min"] = max_value, 0
    if thresholds:
        extra["thresholds"] = {"mode": "absolute",
                               "steps": [{"value": value, "color": color} for value, color in thresholds]}
    return _panel("bargauge", title, description, queries, unit, size, options, **extra)


def table(title: str, description: str, queries: list[dict], unit: str = "short", *, size=(12, 8)) -> dict:
    """Instant queries shown as a table (one column per label, the value last)."""
    transformations = [{"id": "merge", "options": {}},
                       {"id": "organize", "options": {"excludeByName": {"Time": True}}}]
    panel = _panel("table", title, description, queries, unit, size, {"showHeader": True})
    panel["transformations"] = transformations
    return panel


def heatmap(title: str, description: str, queries: list[dict], unit: str = "short", *, size=(12, 8)) -> dict:
    """A histogram's buckets over time (queries should return rates by `le`, format heatmap)."""
    for query in queries:
        query["format"] = "heatmap"
    options = {"calculate": False, "yAxis": {"unit": unit}, "cellGap": 1,
               "color": {"mode": "scheme", "scheme": "Oranges"}, "tooltip": {"show": True}}
    return _panel("heatmap", title, description, queries, unit, size, options)


def layout(panels: list[dict]) -> list[dict]:
    """Ids and grid positions: panels flow left to right, wrapping at Grafana's 24 columns."""
    x = y = row_height = 0
    out = []
    for number, panel in enumerate(panels, start=1):
        panel = dict(panel)
        w, h = panel.pop("_size")
        if x + w > 24:
            x, y, row_height = 0, y + row_height, 0
        panel["id"] = number
        panel["gridPos"] = {"x": x, "y": y, "w": w, "h": h}
        x += w
        row_height = max(row_height, h)
        out.append(panel)
    return out


def datasource_variable() -> dict:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": [], "includeAll": False, "multi": False}


def label_variable(name: str, label: str, metric: str, label_name: str) -> dict:
    """A multi-value variable listing one label's values (All = `.*`, for `=~"$name"` matchers)."""
    query = f"label_values({metric}, {label_name})"
    return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
            "query": {"query": query, "refId": f"{name}-values", "qryType": 1}, "definition": query,
            "refresh": 2, "includeAll": True, "allValue": ".*", "multi": True, "sort": 1, "hide": 0,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "options": [], "regex": ""}


def prometheus_annotation(name: str, expr: str, title: str, text: str, tags: str, color: str) -> dict:
    return {"name": name, "datasource": DATASOURCE, "enable": True, "hide": False, "iconColor": color,
            "expr": expr, "step": "60s", "titleFormat": title, "textFormat": text, "tagKeys": tags,
            "useValueForTime": False}


def dashboard(uid: str, title: str, description: str, panels: list[dict], variables: list[dict],
              annotations: list[dict] = (), time_from: str = "now-6h") -> dict:
    builtin = {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
               "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}
    return {
        "uid": uid, "title": title, "description": description, "tags": ["tiergate"],
        "schemaVersion": SCHEMA_VERSION, "version": 1, "editable": True, "graphTooltip": 1,
        "time": {"from": time_from, "to": "now"}, "refresh": "30s", "timezone": "utc",
        "templating": {"list": [datasource_variable(), *variables]},
        "annotations": {"list": [builtin, *annotations]},
        "panels": layout(panels), "links": [], "fiscalYearStartMonth": 0, "liveNow": False,
    }
