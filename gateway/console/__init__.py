"""The built-in console at /console: overview, routing explorer, quality and workers (read-only)."""
