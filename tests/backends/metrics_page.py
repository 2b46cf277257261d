"""Reading one sample off a worker's /metrics page, for tests that drive a real worker."""
import urllib.request


def metric(base: str, name: str, **labels) -> float:
    """A sample's value from /metrics; 0 when a labelled counter has not been created yet."""
    text = urllib.request.urlopen(base + "/metrics").read().decode()
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    for line in text.splitlines():
        if line.split("{")[0].split(" ")[0] == name and all(w in line for w in wanted):
            return float(line.rsplit(" ", 1)[1])
    if labels:
        return 0.0
    raise AssertionError(f"{name} not in /metrics")
