"""Run the benchmarks and write ``build/bench/results.json``.

python -m bench.run --quick    # `make bench`, a few minutes
python -m bench.run --full     # `make bench-full`
"""

from __future__ import annotations

import argparse
import sys
import time

from bench import (
    bench_assignors,
    bench_broker,
    bench_load,
    bench_log,
    bench_offsets,
    bench_peers,
    plots,
)
from bench.results import Results, markdown


def main() -> int:
    parser = argparse.ArgumentParser()
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True)
    mode.add_argument("--full", action="store_true")
    parser.add_argument("--only", choices=["log", "broker", "load", "peers"], help="one group only")
    args = parser.parse_args()
    quick = not args.full
    results = Results()
    started = time.time()
    if args.only in (None, "log"):
        print("storage engine (broker/log) against the disk", flush=True)
        bench_log.run(results, quick)
    if args.only in (None, "broker"):
        print("the broker's fetch path against a raw sendfile over loopback", flush=True)
        bench_broker.run(results, quick)
    if args.only in (None, "load"):
        print("the nightly load against Spark writing the same rows from memory", flush=True)
        bench_load.run(results, quick)
    if args.only in (None, "offsets"):
        print("the offsets article: auto-commit, commit after processing, the atomic load")
        bench_offsets.run(results, quick)
    if args.only in (None, "assignors"):
        print("Range, RoundRobin, cooperative-sticky: a member leaves and returns")
        bench_assignors.run(results, quick)
    if args.only in (None, "peers"):
        print("Sluice, Tansu, RabbitMQ, ActiveMQ: the paper's section 5 experiments", flush=True)
        bench_peers.run(results, quick)
    command = "make bench" if quick else "make bench-full"
    path = results.save(command)
    for png in plots.render(path.parent):
        print(f"plot {png}")
    print(f"\n{markdown(results.items)}\n\nwrote {path} in {time.time() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
