"""The registry's modes: which writes a subject (or the whole registry) accepts.

=====================  ===============================================================
mode                   writes
=====================  ===============================================================
``READWRITE``          the default: registrations (without an ``id``), deletes
``READONLY``           none: a registration or a delete is refused with 42205
``READONLY_OVERRIDE``  none, as READONLY (Confluent's form that also binds its leader)
``IMPORT``             registrations that give their ``id`` (and optionally ``version``),
                       kept as given and not checked for compatibility; deletes
=====================  ===============================================================

A subject's mode is its own, else the global one, else READWRITE. Setting IMPORT where it is
not in force already needs the scope to be empty (no subject at all for the global mode, no
version of the subject for a subject's mode) unless ``force=true``, as in Confluent's registry
("Cannot import since found existing subjects"): ids chosen by an import must not meet ids the
registry handed out itself in the same subjects. Immutable values; thread-safe.
"""

from __future__ import annotations

import enum

from sluice.schemas.errors import InvalidModeError


class Mode(enum.StrEnum):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"

    @classmethod
    def parse(cls, value: object) -> Mode:
        """The mode a request names (upper case, as Confluent's client sends); 42204 else."""
        if isinstance(value, str):
            try:
                return cls(value.strip().upper())
            except ValueError:
                pass
        allowed = ", ".join(m.value for m in cls)
        raise InvalidModeError(f"Invalid mode. Valid values are: [{allowed}], found {value!r}")

    @property
    def read_only(self) -> bool:
        return self in (Mode.READONLY, Mode.READONLY_OVERRIDE)


DEFAULT_MODE = Mode.READWRITE
