"""Run the benchmarks, merge their rows into ``build/bench/results.json`` and print the report.

python -m bench.run --quick               # `make bench`, a few minutes
python -m bench.run --full                # `make bench-full`
python -m bench.run --only scale          # one group; the other groups' results are kept
python -m bench.run --only transactions   # transactional produce (bench.bench_transactions)
python -m bench.run --only cleaner        # log compaction (bench.bench_cleaner)
python -m bench.run --only tls            # the fetch path over TLS vs plaintext (bench.bench_tls)
python -m bench.run --only cluster        # 3 brokers, RF 3, acks=all (bench.bench_cluster)
python -m bench.run --only iceberg        # Iceberg compaction MB/s, one commit of N files
python -m bench.run --only scale --scale-size 200MB
python -m bench.run --only peers --systems sluice,tansu [--full]   # some systems only
python -m bench.run --only broker --loop uvloop   # the broker under uvloop (bench.uvloop_broker)
python -m bench.run --only profile        # py-spy on the broker: consume, fetch, produce batch 1

A group that fails is reported and the others still run and are saved; the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable

from bench import (
    bench_assignors,
    bench_broker,
    bench_cleaner,
    bench_cluster,
    bench_iceberg,
    bench_load,
    bench_log,
    bench_offsets,
    bench_peers,
    bench_profile,
    bench_scale,
    bench_tls,
    bench_transactions,
    plots,
    report,
)
from bench.results import Results

# group -> (what it measures, how to run it); run in this order.
GROUPS: dict[str, tuple[str, Callable[[Results, bool, argparse.Namespace], object]]] = {
    "log": ("storage engine (broker/log) against the disk",
            lambda r, q, _a: bench_log.run(r, q)),
    "cleaner": ("log compaction: the cleaner's MB/s, reading a compacted topic",
                lambda r, q, _a: bench_cleaner.run(r, q)),
    "broker": ("the broker's fetch path against a raw sendfile over loopback",
               lambda r, q, a: bench_broker.run(r, q, a.loop)),
    "tls": ("the fetch path over TLS (no sendfile) against plaintext: MB/s, broker CPU per GB",
            lambda r, q, _a: bench_tls.run(r, q)),
    "transactions": ("transactional produce at 1, 10, 100 batches per transaction vs idempotent",
                     lambda r, q, _a: bench_transactions.run(r, q)),
    "cluster": ("3 broker processes + ZooKeeper, RF 3, min.insync.replicas=2: acks=all latency, "
                "throughput, thousands of partitions, transactions, rebalance, failover",
                lambda r, q, _a: bench_cluster.run(r, q)),
    "scale": ("produce and consume throughput as the log grows to GBs",
              lambda r, q, a: bench_scale.run(r, q, a.scale_size)),
    "load": ("the nightly load against Spark writing the same rows from memory",
             lambda r, q, _a: bench_load.run(r, q)),
    "iceberg": ("Iceberg tables: compaction MB/s (small files into one per day), one commit "
                "of N files",
                lambda r, q, _a: bench_iceberg.run(r, q)),
    "offsets": ("the offsets article: auto-commit, commit after processing, the atomic load",
                lambda r, q, _a: bench_offsets.run(r, q)),
    "assignors": ("Range, RoundRobin, cooperative-sticky: a member leaves and returns",
                  lambda r, q, _a: bench_assignors.run(r, q)),
    "peers": ("Sluice, Tansu, RabbitMQ, ActiveMQ: the paper's section 5 experiments",
              lambda r, q, a: bench_peers.run(r, q, a.systems)),
    "profile": ("where the broker's time goes (py-spy): consume, fetch, produce batch 1",
                lambda r, q, a: bench_profile.run(r, q, a.loop)),
}  # fmt: skip
# Groups a plain run (no --only) leaves out: they measure the measurer, not the system.
ON_REQUEST = ("profile",)


def command_line(args: argparse.Namespace) -> str:
    """The command as recorded in machine.json, flags in a fixed order."""
    words = ["python -m bench.run", "--full" if args.full else "--quick"]
    if args.only:
        words += ["--only", args.only]
    if args.scale_size is not None and args.only in (None, "scale"):
        words += ["--scale-size", str(args.scale_size_text)]
    if args.systems_text is not None and args.only in (None, "peers"):
        words += ["--systems", ",".join(args.systems)]
    if args.loop != "asyncio" and args.only in ("broker", "profile"):
        words += ["--loop", args.loop]
    return " ".join(words)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True)
    mode.add_argument("--full", action="store_true")
    parser.add_argument("--only", choices=list(GROUPS), help="one group only")
    parser.add_argument(
        "--scale-size",
        dest="scale_size_text",
        metavar="SIZE",
        help="scale: log size to reach, e.g. 200MB (default 1 GB, full 5 GB)",
    )
    parser.add_argument(
        "--systems",
        dest="systems_text",
        metavar="LIST",
        help=f"peers: some of {','.join(bench_peers.KNOWN)} "
        f"(default {','.join(bench_peers.SYSTEMS)})",
    )
    parser.add_argument(
        "--loop",
        choices=bench_broker.LOOPS,
        default="asyncio",
        help="broker, profile: the broker's event loop (uvloop through bench.uvloop_broker)",
    )
    args = parser.parse_args(argv)
    args.scale_size = (None if args.scale_size_text is None
                       else bench_scale.parse_size(args.scale_size_text))  # fmt: skip
    try:
        args.systems = (bench_peers.SYSTEMS if args.systems_text is None
                        else bench_peers.select(args.systems_text))  # fmt: skip
    except ValueError as e:
        parser.error(str(e))
    quick = not args.full
    results = Results()
    started = time.time()
    failed = []
    for name, (title, run) in GROUPS.items():
        if args.only not in (None, name) or (args.only is None and name in ON_REQUEST):
            continue
        print(f"{name}: {title}", flush=True)
        try:
            run(results, quick, args)
        except Exception:  # the other groups' numbers are still worth saving
            traceback.print_exc()
            print(f"{name}: FAILED", flush=True)
            failed.append(name)
    path = results.save(command_line(args), "quick" if quick else "full")
    for png in plots.render(path.parent):
        print(f"plot {png}")
    print("\n" + report.render_dir(path.parent))
    print(f"\nwrote {path} in {time.time() - started:.0f}s"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
