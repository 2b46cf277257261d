"""Metric names used by PromQL expressions, and the expressions of a Grafana dashboard.

Not a full PromQL parser: enough to find every metric selector in the queries we write.
String literals, label matchers `{...}`, range/subquery brackets `[...]`, grouping clauses
(`by (...)`, `without (...)`, `on (...)`, `ignoring (...)`, `group_left/right (...)`) and
function calls' names are removed; every identifier left is a metric name.
Grafana variables ($tenant, $__range, ${datasource}) only appear inside those removed parts
or are dropped with their `$`.
"""
from __future__ import annotations

import re

_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.I)
_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_IDENT = re.compile(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
             "group_right", "inf", "nan", "atan2"}


def metric_names(expr: str) -> set[str]:
    text = _STRING.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)  # after strings: a "}" inside a label value is already gone
    text = _BRACKETS.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _VARIABLE.sub(" ", text)
    names = set()
    for match in _IDENT.finditer(text):
        name, is_call = match.group(1), match.group(2)
        if is_call or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names


def dashboard_exprs(dashboard: dict) -> list[tuple[str, str]]:
    """(where, expr) for every PromQL query: panel targets, variables and annotations."""
    found = []
    for panel in dashboard.get("panels", []):
        for item in [panel, *panel.get("panels", [])]:  # collapsed rows nest their panels
            for t in item.get("targets", []):
                if t.get("expr"):
                    found.append((f"panel {item.get('title')!r} {t.get('refId')}", t["expr"]))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        if variable.get("type") == "query" and text:
            match = re.fullmatch(r"\s*label_values\((.*),\s*\w+\)\s*", text)
            found.append((f"variable {variable['name']}", match.group(1) if match else text))
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if annotation.get("expr"):
            found.append((f"annotation {annotation.get('name')!r}", annotation["expr"]))
    return found
