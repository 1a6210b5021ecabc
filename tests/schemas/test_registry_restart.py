"""A registry process restarted on the same data dir keeps every id, subject and setting."""

from __future__ import annotations

import json
import signal
from typing import Any

from sluice.schemas import schema_path
from sluice.schemas.client import RegistryClient

AUDIT = json.loads(schema_path("audit_count").read_text())


def variant(i: int) -> str:
    return json.dumps(dict(AUDIT, doc=f"variant {i}"))


def test_restart_keeps_ids_and_never_reuses_them(start_registry: Any) -> None:
    first = start_registry("data")
    with RegistryClient(first.url) as c:
        ids = {f"s{i}-value": c.register(f"s{i}-value", variant(i)) for i in range(3)}
        c.register("s0-value", variant(10))  # version 2 (only the doc differs: compatible)
        c.set_compatibility("FULL", "s1-value")
        c.set_compatibility("NONE")
        doomed = c.register("doomed-value", variant(99))
        c.delete_subject("doomed-value")
        c.delete_subject("doomed-value", permanent=True)
    assert first.stop(signal.SIGINT) == 0, first.log()
    assert "stopped by SIGINT" in first.log()

    second = start_registry("data")
    with RegistryClient(second.url) as c:
        assert c.subjects() == sorted(ids)
        for subject, schema_id in ids.items():
            assert c.get_version(subject, 1)["id"] == schema_id
        assert c.versions("s0-value") == [1, 2]
        assert c.get_compatibility("s1-value") == "FULL"
        assert c.get_compatibility() == "NONE"
        fresh = c.register("fresh-value", variant(99))  # the doomed schema, again
        assert fresh > max(*ids.values(), doomed)
    assert second.stop() == 0, second.log()


def test_second_process_on_same_dir_refuses(start_registry: Any) -> None:
    owner = start_registry("data")
    intruder = start_registry("data", wait=False)
    assert intruder.proc.wait(timeout=20) == 1
    assert "in use by another registry process" in intruder.log()
    assert owner.stop() == 0
