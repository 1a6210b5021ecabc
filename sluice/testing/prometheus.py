"""Reading a Prometheus ``/metrics`` endpoint back, as a scraper would: every sample by name and
labels. Thread-safe (no shared state)."""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int, timeout: float = 10.0) -> Samples:
    """Every sample ``http://127.0.0.1:<port>/metrics`` serves, by (name, labels); a status
    other than 200 raises ``AssertionError`` saying which."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as response:
        assert response.status == 200, f"{url}: expected status 200, found {response.status}"
        text = response.read().decode("utf-8")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def samples_named(
    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> dict[frozenset[tuple[str, str]], float]:
    """The samples called ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return {lbl: v for (n, lbl), v in samples.items() if n == name and want <= lbl}
