"""``check_file_descriptors``: refuse new partitions that would leave too few descriptors.

Every partition is a directory and three open files (the active segment's .log, .index and
.timeindex), created on the event loop. Kafka sets no limit on partitions, but one CreateTopics
request must not exhaust the broker's file descriptors: out of them, the broker can neither
accept a connection nor close a log cleanly (closing writes a producer-state snapshot), so a
topic that would leave fewer than ``FD_HEADROOM`` free is refused up front. Pure reads of
``/proc``; thread-safe.
"""

from __future__ import annotations

import os
import resource

from sluice.broker.cluster.topic_metadata import InvalidPartitionsError

__all__ = ["FDS_PER_PARTITION", "FD_HEADROOM", "check_file_descriptors"]

FDS_PER_PARTITION = 3
FD_HEADROOM = 64


def check_file_descriptors(partitions: int) -> None:
    """Refuse ``partitions`` new logs if they would leave fewer than ``FD_HEADROOM`` file
    descriptors free (Linux: counted in /proc/self/fd; elsewhere not checked)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        return
    needed = partitions * FDS_PER_PARTITION
    if in_use + needed + FD_HEADROOM > soft:
        raise InvalidPartitionsError(
            f"{partitions} partitions need {needed} file descriptors and only "
            f"{soft - in_use - FD_HEADROOM} are free (ulimit -n {soft}, {in_use} in use, "
            f"{FD_HEADROOM} kept for connections); raise the limit or use fewer partitions"
        )
