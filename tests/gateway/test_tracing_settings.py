"""The `tracing:` section: off by default, validated like every section, and every one of its
settings reaches the workers the launcher starts (as flags the worker reads back)."""
import dataclasses

import pytest

from backends.worker import build_parser
from gateway.config import ConfigError, parse_config
from gateway.config.tracing import TracingConfig
from webwire.trace_flags import FLAGS, as_flags, from_args
from webwire.tracing import Exporting

TIERS = [{"name": "small", "level": 1, "model": "m", "price_per_mtok": {"input": 0.1, "output": 0.2},
          "workers": [{"url": "http://127.0.0.1:8101"}]}]


def test_tracing_is_off_by_default_and_then_passes_no_worker_flags():
    settings = parse_config({"tiers": TIERS}).tracing
    assert settings.enabled is False and settings.exporting() is None and settings.for_workers() is None
    assert as_flags(settings.for_workers()) == []
    assert from_args(build_parser().parse_args(["--model", "m"])) is None  # a worker without the flag: off


@pytest.mark.parametrize("section, field", [
    ({"otlp_endpoint": "ftp://collector:4318"}, "tracing.otlp_endpoint"),
    ({"otlp_endpoint": "http://user:secret@collector:4318"}, "tracing.otlp_endpoint"),
    ({"sample_ratio": 1.5}, "tracing.sample_ratio"),
    ({"export_interval_s": 0}, "tracing.export_interval_s"),
    ({"max_queued_spans": 0}, "tracing.max_queued_spans"),
    ({"endpoint": "http://collector:4318"}, "tracing.endpoint"),  # unknown keys are errors, not ignored
])
def test_bad_tracing_settings_name_their_field(section, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        parse_config({"tiers": TIERS, "tracing": section})


def test_every_tracing_setting_reaches_the_workers_the_launcher_starts():
    settings = parse_config({"tiers": TIERS, "tracing": {
        "enabled": True, "otlp_endpoint": "http://collector:4318/", "service_name": "gw",
        "worker_service_name": "wk", "sample_ratio": 0.25, "export_timeout_s": 3.5, "export_interval_s": 0.5,
        "max_queued_spans": 100}}).tracing
    assert settings.exporting() == Exporting("http://collector:4318", "gw", 0.25, 3.5, 0.5, 100)
    expected = Exporting("http://collector:4318", "wk", 0.25, 3.5, 0.5, 100)
    assert settings.for_workers() == expected
    worker_args = build_parser().parse_args(["--model", "m", *as_flags(settings.for_workers())])
    assert from_args(worker_args) == expected
    # a field added to Exporting without a worker flag would be dropped on the way: none is
    assert set(FLAGS) == {f.name for f in dataclasses.fields(Exporting)}


def test_a_reload_that_changes_tracing_says_it_waits_for_a_restart(caplog):
    from gateway.core.trace_spans import warn_if_changed

    warn_if_changed(TracingConfig(), TracingConfig())
    assert "tracing" not in caplog.text
    warn_if_changed(TracingConfig(), TracingConfig(enabled=True))
    assert "takes effect when the gateway restarts" in caplog.text
