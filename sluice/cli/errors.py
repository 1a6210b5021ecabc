"""How a ``sluice`` command fails: one line on stderr and an exit status a script can test.

=====  ==================================================================================
exit   meaning
=====  ==================================================================================
0      the command did what it printed
1      it failed: the service answered but refused, or only part of the work was done
       (``produce`` with undelivered messages, a topic that does not exist, ...)
2      usage or configuration: a bad flag, a missing or malformed config file or key
3      a service could not be reached: the Kafka cluster, the schema registry, ZooKeeper
130    interrupted (Ctrl-C)
=====  ==================================================================================

Commands raise :class:`CommandError` subclasses for failures they recognise; ``classify``
turns any exception into ``(exit status, one-line message)`` in one place: configuration
errors of every package (every exception type named ``*ConfigError``, and
``PropertiesError``) are 2, librdkafka's transport and timeout errors and the registry
client's connection errors are 3. The traceback is shown only with ``sluice --debug``.
``unreachable_cause`` finds, in an exception's chain, the failure that means a service did not
answer (a command that wraps failures in its own error type uses it to tell 3 from 1), and
``report`` prints a command's one line (the traceback first with ``--debug``).
"""

from __future__ import annotations

import sys
import traceback

from confluent_kafka import KafkaError, KafkaException

from sluice.common.options import InvalidOptionError
from sluice.common.properties import PropertiesError
from sluice.schemas.errors import RegistryConnectionError, SchemasError

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CommandError",
    "CommandUsageError",
    "ServiceUnreachableError",
    "classify",
    "raise_for_kafka",
    "report",
    "unreachable_cause",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

# librdkafka's local errors that mean "no broker answered", not "a broker said no".
_UNREACHABLE_CODES = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._WAIT_COORD,
    }
)

# The packages' own "did not answer" errors, by type name: importing them here would import
# the ``spark`` extra (pyarrow, pyiceberg) into every command. ``MetadataError`` is the Kafka
# source's "no answer to a metadata or offsets request".
_UNREACHABLE_TYPES = frozenset(
    {"UnreachableError", "BrokersUnreachableError", "CatalogUnavailableError", "MetadataError"}
)


class CommandError(Exception):
    """A command failed in a way it understands; the message is the one line to print."""

    exit_code = EXIT_FAILURE


class CommandUsageError(CommandError):
    """The command line or a configuration value is wrong."""

    exit_code = EXIT_USAGE


class ServiceUnreachableError(CommandError):
    """A service (Kafka, the registry, ZooKeeper) did not answer."""

    exit_code = EXIT_UNREACHABLE


def unreachable(error: KafkaError | None) -> bool:
    """True when librdkafka's ``error`` means no broker answered."""
    return error is not None and error.code() in _UNREACHABLE_CODES


def raise_for_kafka(exc: KafkaException, what: str, bootstrap: str) -> None:
    """Re-raise a confluent-kafka exception as the command error it stands for."""
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    reason = error.str() if error is not None else str(exc)
    if unreachable(error):
        raise ServiceUnreachableError(
            f"{what}: no broker of {bootstrap} answered ({reason})"
        ) from exc
    raise CommandError(f"{what}: {reason}") from exc


def unreachable_cause(exc: BaseException) -> BaseException | None:
    """The first exception in ``exc``'s chain (itself, then each ``__cause__``, else
    ``__context__``: a ``raise ... from None`` keeps the latter) that means a service did not
    answer: a ``ServiceUnreachableError``, the registry client's connection error, librdkafka's
    transport or timeout errors, or a package's unreachable error; None when there is none."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ServiceUnreachableError | RegistryConnectionError):
            return current
        if isinstance(current, KafkaException):
            error = current.args[0] if current.args else None
            if isinstance(error, KafkaError) and unreachable(error):
                return current
        if type(current).__name__ in _UNREACHABLE_TYPES:
            return current
        current = current.__cause__ or current.__context__
    return None


def report(command: str, code: int, message: str, debug: bool) -> int:
    """Print ``sluice <command>: <message>`` on stderr (the traceback of the exception being
    handled first when ``debug``); return ``code``."""
    if debug:
        traceback.print_exc()
    print(f"sluice {command}: {message}", file=sys.stderr, flush=True)
    return code


def classify(exc: BaseException) -> tuple[int, str]:
    """The exit status and the one-line message for an exception a command raised."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "interrupted"
    if isinstance(exc, CommandError):
        return exc.exit_code, str(exc)
    if isinstance(exc, RegistryConnectionError):
        return EXIT_UNREACHABLE, str(exc)
    if isinstance(exc, PropertiesError | InvalidOptionError) or type(exc).__name__.endswith(
        "ConfigError"
    ):
        return EXIT_USAGE, f"bad configuration: {exc}"
    if isinstance(exc, SchemasError):
        return EXIT_FAILURE, str(exc)
    if isinstance(exc, KafkaException):
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if unreachable(error):
            return EXIT_UNREACHABLE, f"the Kafka cluster did not answer: {error.str()}"  # type: ignore[union-attr]
        return EXIT_FAILURE, str(error.str() if error is not None else exc)
    if isinstance(exc, FileNotFoundError):
        return EXIT_USAGE, f"no such file: {exc.filename}"
    if isinstance(exc, OSError):
        return EXIT_FAILURE, f"{exc.strerror or exc}" + (
            f": {exc.filename}" if exc.filename else ""
        )
    return (
        EXIT_FAILURE,
        f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)",
    )
