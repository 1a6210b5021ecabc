"""``TopicPartition`` and Kafka's topic-name rules, shared by the broker and its clients.

A topic name is 1–249 characters of ``[a-zA-Z0-9._-]`` and is neither ``.`` nor ``..``
(Kafka's ``Topic.validate``), so ``<log dir>/<topic>-<partition>`` never escapes its log dir.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class InvalidTopicError(ValueError):
    """A topic name breaks Kafka's naming rules (and could escape a log dir)."""


MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic(name: str) -> str:
    """Return ``name`` if Kafka would accept it as a topic name, else raise."""
    if not name:
        raise InvalidTopicError("expected a topic name of 1 to 249 characters, found ''")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"expected a topic name of at most {MAX_NAME_LENGTH} characters, found {len(name)}"
        )
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(
            f"expected a topic name of ASCII letters, digits, '.', '_' and '-', found {name!r}"
        )
    return name


class TopicPartition(NamedTuple):
    """One partition of one topic. Immutable, hashable, ordered by (topic, partition)."""

    topic: str
    partition: int

    @property
    def dir_name(self) -> str:
        """The partition's directory name inside a log dir: ``<topic>-<partition>``."""
        return f"{self.topic}-{self.partition}"

    @classmethod
    def from_dir_name(cls, name: str) -> TopicPartition:
        """Parse ``<topic>-<partition>``; raise :class:`InvalidTopicError` if it is not one."""
        topic, sep, partition = name.rpartition("-")
        if not sep or not partition.isdigit():
            raise InvalidTopicError(f"expected a '<topic>-<partition>' directory, found {name!r}")
        return cls(validate_topic(topic), int(partition))

    def __str__(self) -> str:
        return self.dir_name
