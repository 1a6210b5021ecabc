"""Micro-benchmark of the Kafka codec: microseconds per operation.

Run: ``.venv/bin/python bench/bench_protocol.py``. Measures

- Produce v8 request (one partition, 16 KiB of records): kio encode, our decode_request (bounds
  walk + kio parse), and the bounds walk alone;
- Fetch v11 request decode, 1 and 100 partitions;
- Metadata v8 response encode (20 topics × 6 partitions, 3 brokers);
- the zero-copy Fetch v11 response encoder (1 and 100 partitions, records as file slices),
  next to kio encoding the same response with the record bytes in memory.
"""

from __future__ import annotations

import sys
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.fetch.v11 import request as fetch_req  # noqa: E402
from kio.schema.fetch.v11 import response as fetch_resp  # noqa: E402
from kio.schema.metadata.v8 import response as meta  # noqa: E402
from kio.schema.produce.v8 import request as produce  # noqa: E402

from sluice.broker.protocol.bounds import check_bounds  # noqa: E402
from sluice.broker.protocol.codec import decode_request, encode_request, encode_response  # noqa: E402
from sluice.broker.protocol.fetch_response import (  # noqa: E402
    FetchPartition,
    FetchTopic,
    encode_fetch_response,
)
from sluice.broker.protocol.headers import RequestHeader, parse_request_header  # noqa: E402


@dataclass
class Slice:
    """Stand-in for the storage layer's FileSlice."""

    size: int


def bench(name: str, fn: Callable[[], object], min_time: float = 0.5) -> None:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(number, int(number * min_time / 0.2))
    best = min(timer.repeat(repeat=5, number=number)) / number
    print(f"{name:<62} {best * 1e6:10.2f} µs/op")


def produce_request() -> produce.ProduceRequest:
    records = bytes(16 * 1024)
    return produce.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(seconds=30),
        topic_data=(
            produce.TopicProduceData(
                name="events",
                partition_data=(produce.PartitionProduceData(index=0, records=records),),
            ),
        ),
    )


def fetch_request(partitions: int) -> fetch_req.FetchRequest:
    return fetch_req.FetchRequest(
        replica_id=-1,
        max_wait=timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=(
            fetch_req.FetchTopic(
                topic="events",
                partitions=tuple(
                    fetch_req.FetchPartition(
                        partition=i,
                        current_leader_epoch=-1,
                        fetch_offset=1000,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for i in range(partitions)
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def metadata_response() -> meta.MetadataResponse:
    brokers = tuple(
        meta.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=9092 + i, rack=None)
        for i in range(3)
    )
    topics = tuple(
        meta.MetadataResponseTopic(
            error_code=ErrorCode.none,
            name=f"topic-{t}",
            is_internal=False,
            partitions=tuple(
                meta.MetadataResponsePartition(
                    error_code=ErrorCode.none,
                    partition_index=p,
                    leader_id=p % 3,
                    leader_epoch=0,
                    replica_nodes=(0, 1, 2),
                    isr_nodes=(0, 1, 2),
                    offline_replicas=(),
                )
                for p in range(6)
            ),
            topic_authorized_operations=-2147483648,
        )
        for t in range(20)
    )
    return meta.MetadataResponse(
        throttle_time=timedelta(0),
        brokers=brokers,
        cluster_id="sluice",
        controller_id=0,
        topics=topics,
        cluster_authorized_operations=-2147483648,
    )


def fetch_topics(partitions: int, size: int) -> list[FetchTopic]:
    return [
        FetchTopic(
            "events",
            [FetchPartition(i, 0, 5000, 5000, 0, None, -1, Slice(size)) for i in range(partitions)],
        )
    ]


def kio_fetch_response(partitions: int, size: int) -> fetch_resp.FetchResponse:
    records = bytes(size)
    return fetch_resp.FetchResponse(
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(
            fetch_resp.FetchableTopicResponse(
                topic="events",
                partitions=tuple(
                    fetch_resp.PartitionData(
                        partition_index=i,
                        error_code=ErrorCode.none,
                        high_watermark=5000,
                        last_stable_offset=5000,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=records,
                    )
                    for i in range(partitions)
                ),
            ),
        ),
    )


def main() -> None:
    print(f"Python {sys.version.split()[0]}; kio codec; best of 5 runs\n")

    body = produce_request()
    frame = encode_request(1, "bench", body)[4:]
    bench("Produce v8 request encode (kio, 16 KiB records)", lambda: encode_request(1, "b", body))
    bench("Produce v8 request decode (decode_request: walk + kio)", lambda: decode_request(frame))
    _, body_at = parse_request_header(frame, 1)
    bench("  of which the bounds walk", lambda: check_bounds(type(body), frame, body_at))

    for n in (1, 100):
        fetch_frame = encode_request(1, "bench", fetch_request(n))[4:]
        bench(f"Fetch v11 request decode ({n} partitions)", lambda f=fetch_frame: decode_request(f))

    metadata = metadata_response()
    header = RequestHeader(3, 8, 1, "bench", 1)
    bench(
        "Metadata v8 response encode (kio, 20 topics x 6 partitions)",
        lambda: encode_response(header, metadata),
    )

    fetch_header = RequestHeader(1, 11, 1, "bench", 1)
    for n in (1, 100):
        topics = fetch_topics(n, 1 << 20)
        bench(
            f"Fetch v11 response, zero-copy encoder ({n} partitions x 1 MiB)",
            lambda t=topics: encode_fetch_response(fetch_header, t),
        )
    for n, size in ((1, 16 << 10), (1, 1 << 20), (100, 16 << 10)):
        kio_body = kio_fetch_response(n, size)
        bench(
            f"Fetch v11 response, kio encoder ({n} partitions x {size >> 10} KiB, copies)",
            lambda b=kio_body: encode_response(fetch_header, b),
        )


if __name__ == "__main__":
    main()
