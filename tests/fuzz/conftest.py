import pytest

from live_stack import LiveStack


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """One real gateway + fake upstream per test module (starting the processes costs ~2 s)."""
    live = LiveStack(tmp_path_factory.mktemp("live")).start()
    yield live
    live.stop()
