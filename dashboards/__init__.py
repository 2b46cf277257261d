"""Grafana dashboards (built by `python -m dashboards.generate`) and the Prometheus scrape config."""
