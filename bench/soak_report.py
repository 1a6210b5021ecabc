"""The soak's outputs: ``results.json``, a Markdown table and a PNG of throughput over time with
each fault marked (a shaded span from injection to heal, one colour per kind).

Throughput is acknowledgements per second, binned by the time each delivery report arrived
(seconds since the workload started). matplotlib is imported lazily (an optional dependency).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.soak_workload import Ack
from sluice.testing.faults import KINDS, Fault

COLOURS = {
    "leader-kill": "tab:red",
    "follower-kill": "tab:orange",
    "controller-kill": "tab:purple",
    "zookeeper-restart": "tab:brown",
    "session-expiry": "tab:pink",
    "partition": "tab:blue",
    "slow-disk": "tab:olive",
}


def throughput(acks: Iterable[Ack], seconds: int) -> list[int]:
    """Acknowledgements per one-second bin, ``seconds`` bins."""
    bins = Counter(int(a.at) for a in acks)
    return [bins.get(s, 0) for s in range(seconds)]


def write_json(path: Path, results: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def markdown_table(results: Mapping[str, Any]) -> str:
    """Faults injected by kind, then the messages acked, lost, duplicated, reordered."""
    counts: Mapping[str, int] = results["faults_by_kind"]
    check: Mapping[str, Any] = results["check"]
    lines = [
        f"Soak: {results['minutes']:g} minutes, seed {results['seed']}, three brokers, "
        f"{results['partitions']} partitions (replication 3, min.insync.replicas 2), an "
        "idempotent acks=all producer and a consumer group reading along, and a plain acks=1 "
        "producer on a topic of its own.",
        "",
        "| fault | injected |",
        "|---|---:|",
        *(f"| {kind} | {counts.get(kind, 0)} |" for kind in KINDS),
        f"| **total** | **{sum(counts.values())}** |",
        "",
        "| messages | count |",
        "|---|---:|",
        f"| acknowledged | {check['acked']:,} |",
        f"| lost | {check['lost']} |",
        f"| duplicated | {check['duplicated']} |",
        f"| reordered | {check['reordered']} |",
        f"| acknowledged at another offset | {check['moved']} |",
        f"| consumed by the group, then gone from the log | {check['consumed_lost']} |",
        f"| partitions with a committed offset ahead of delivered data | "
        f"{check['commits_ahead']} |",
        f"| delivered to the group | {check['consumed']:,} |",
        f"| not acknowledged (delivery failed, by error) | "
        f"{_errors(results['producer']['failed'])} |",
        f"| fatal producer errors (producer replaced) | "
        f"{len(results['producer']['fatal_errors'])} |",
    ]
    acks1 = results.get("acks1")
    if acks1 is not None:
        lines += [
            "",
            "acks=1 producer (not idempotent; Kafka documents that acks=1 may lose acknowledged "
            "writes when a leader fails):",
            "",
            "| acks=1 messages | count |",
            "|---|---:|",
            f"| acknowledged | {acks1['acked']:,} |",
            f"| acknowledged, then lost | {acks1['lost']} |",
            *(f"| lost around {name} | {n} |" for name, n in acks1["lost_by_fault"].items()),
            f"| not acknowledged (delivery failed, by error) | {_errors(acks1['failed'])} |",
        ]
    unrecovered = [f for f in results["faults"] if "not recovered" in f["note"]]
    if unrecovered:
        lines += ["", f"Faults after which the cluster did not recover in time: {len(unrecovered)}"]
    return "\n".join(lines) + "\n"


def _errors(failed: Mapping[str, int]) -> str:
    if not failed:
        return "0"
    return f"{sum(failed.values()):,} (" + ", ".join(f"{k} {v}" for k, v in failed.items()) + ")"


def plot(path: Path, rates: Sequence[int], faults: Sequence[Fault], title: str) -> None:
    """Acks/s over time, each fault a shaded span labelled with its kind."""
    import matplotlib  # optional dependency: lazy

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 4.5), dpi=110)
    ax.plot(range(len(rates)), rates, color="black", linewidth=1, label="acks/s")
    top = max(rates, default=1) * 1.15 or 1
    seen: set[str] = set()
    for f in faults:
        end = f.healed_at if f.healed_at is not None else len(rates)
        label = None if f.kind in seen else f.kind
        seen.add(f.kind)
        ax.axvspan(f.injected_at, end, color=COLOURS.get(f.kind, "grey"), alpha=0.3, label=label)
        ax.text(f.injected_at, top * 0.97, f.target.replace("broker ", "b"), fontsize=7, va="top")
    ax.set_ylim(0, top)
    ax.set_xlim(0, max(len(rates), 1))
    ax.set_xlabel("seconds since the producer started")
    ax.set_ylabel("acknowledged messages / s")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, ncol=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
