"""Every failure the registry and the serde can report, one class each.

Registry errors carry Confluent's HTTP status and ``error_code`` so one table serves both sides:
the server turns a raised :class:`RegistryError` into ``{"error_code", "message"}`` with the
status, and the client turns such a body back into the same class with :func:`error_for_code`.

=========  ======  ==============================================================
error code status  class
=========  ======  ==============================================================
40401      404     :class:`SubjectNotFoundError`
40402      404     :class:`VersionNotFoundError`
40403      404     :class:`SchemaNotFoundError`
40404      404     :class:`SubjectSoftDeletedError`
40405      404     :class:`SubjectNotSoftDeletedError`
40406      404     :class:`VersionSoftDeletedError`
40407      404     :class:`VersionNotSoftDeletedError`
40408      404     :class:`SubjectConfigNotFoundError`
40409      404     :class:`SubjectModeNotFoundError`
409        409     :class:`IncompatibleSchemaError`
42201      422     :class:`InvalidSchemaError`
42202      422     :class:`InvalidVersionError`
42203      422     :class:`InvalidCompatibilityLevelError`
42204      422     :class:`InvalidModeError`
42205      422     :class:`OperationNotPermittedError`
42206      422     :class:`ReferenceExistsError`
42208      422     :class:`InvalidSubjectError`
42209      422     :class:`SchemaTooLargeError`
400        400     :class:`BadRequestError`
401        401     :class:`UnauthorizedError`
403        403     :class:`ForbiddenError`
404        404     :class:`RouteNotFoundError`
413        413     :class:`RequestTooLargeError`
50001      500     :class:`StoreError`
=========  ======  ==============================================================

Serde errors (:class:`SerdeError` and below) never cross HTTP; they say what the decoder
expected and what it found in the bytes.

Security configuration errors (:class:`RegistrySecurityConfigError` and below) are raised at
start-up (server) or construction (client). None of them quotes a password, a key, a
credential or a file's content; keys and file paths are named.
"""

from __future__ import annotations


class SchemasError(Exception):
    """Base of every error raised by the ``schemas`` package."""


# --------------------------------------------------------------------------------------------
# Registry errors (Confluent REST error codes)
# --------------------------------------------------------------------------------------------


class RegistryError(SchemasError):
    """A failure with a Confluent error code; ``http_status`` is what the server answers."""

    http_status: int = 500
    error_code: int = 50001

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_json(self) -> dict[str, object]:
        """The Confluent error body: ``{"error_code": int, "message": str}``."""
        return {"error_code": self.error_code, "message": self.message}


class SubjectNotFoundError(RegistryError):
    http_status, error_code = 404, 40401


class VersionNotFoundError(RegistryError):
    http_status, error_code = 404, 40402


class SchemaNotFoundError(RegistryError):
    http_status, error_code = 404, 40403


class SubjectSoftDeletedError(RegistryError):
    """A soft delete of a subject whose versions are all soft-deleted already."""

    http_status, error_code = 404, 40404


class SubjectNotSoftDeletedError(RegistryError):
    """A permanent delete of a subject that still has live versions."""

    http_status, error_code = 404, 40405


class VersionSoftDeletedError(RegistryError):
    """A soft delete of a version that is soft-deleted already."""

    http_status, error_code = 404, 40406


class VersionNotSoftDeletedError(RegistryError):
    """A permanent delete of a version that was not soft-deleted first."""

    http_status, error_code = 404, 40407


class SubjectConfigNotFoundError(RegistryError):
    """``GET /config/{s}`` for a subject without its own level (and no ``defaultToGlobal``)."""

    http_status, error_code = 404, 40408


class SubjectModeNotFoundError(RegistryError):
    """``GET|DELETE /mode/{s}`` for a subject without its own mode (and no ``defaultToGlobal``)."""

    http_status, error_code = 404, 40409


class IncompatibleSchemaError(RegistryError):
    http_status, error_code = 409, 409


class InvalidSchemaError(RegistryError):
    http_status, error_code = 422, 42201


class InvalidVersionError(RegistryError):
    http_status, error_code = 422, 42202


class InvalidCompatibilityLevelError(RegistryError):
    http_status, error_code = 422, 42203


class InvalidModeError(RegistryError):
    """A mode other than READWRITE, READONLY, READONLY_OVERRIDE and IMPORT."""

    http_status, error_code = 422, 42204


class OperationNotPermittedError(RegistryError):
    """A write the mode forbids (READONLY; an explicit id outside IMPORT), an import over
    another schema's id, or IMPORT set over existing subjects without ``force``."""

    http_status, error_code = 422, 42205


class ReferenceExistsError(RegistryError):
    """A delete of a subject version that another schema references."""

    http_status, error_code = 422, 42206


class InvalidSubjectError(RegistryError):
    """A subject name with control characters, or longer than the registry allows."""

    http_status, error_code = 422, 42208


class SchemaTooLargeError(RegistryError):
    """Schema text longer than ``schema.registry.max.schema.size`` bytes."""

    http_status, error_code = 422, 42209


class StoreError(RegistryError):
    """The backing store failed (I/O error, corrupt file); the request changed nothing."""

    http_status, error_code = 500, 50001


class BadRequestError(RegistryError):
    """The request body is not the JSON object the endpoint expects."""

    http_status, error_code = 400, 400


class UnauthorizedError(RegistryError):
    """No credentials, an unknown user or a wrong password (HTTP Basic authentication)."""

    http_status, error_code = 401, 401


class ForbiddenError(RegistryError):
    """Authenticated, but the user holds none of ``authentication.roles``."""

    http_status, error_code = 403, 403


class RouteNotFoundError(RegistryError):
    """No such endpoint (Confluent answers unknown paths with ``error_code`` 404)."""

    http_status, error_code = 404, 404


class RequestTooLargeError(RegistryError):
    """A request body over the size limit (Confluent's Jetty answers 413 with code 413)."""

    http_status, error_code = 413, 413


class UnexpectedResponseError(RegistryError):
    """The client got a status or body that is not a Confluent error (not a registry?)."""

    http_status, error_code = 502, -1


_BY_CODE: dict[int, type[RegistryError]] = {
    cls.error_code: cls
    for cls in (
        SubjectNotFoundError,
        VersionNotFoundError,
        SchemaNotFoundError,
        SubjectSoftDeletedError,
        SubjectNotSoftDeletedError,
        VersionSoftDeletedError,
        VersionNotSoftDeletedError,
        SubjectConfigNotFoundError,
        SubjectModeNotFoundError,
        IncompatibleSchemaError,
        InvalidSchemaError,
        InvalidVersionError,
        InvalidCompatibilityLevelError,
        InvalidModeError,
        OperationNotPermittedError,
        ReferenceExistsError,
        InvalidSubjectError,
        SchemaTooLargeError,
        StoreError,
        BadRequestError,
        UnauthorizedError,
        ForbiddenError,
        RouteNotFoundError,
        RequestTooLargeError,
    )
}


def error_for_code(error_code: int, message: str, http_status: int) -> RegistryError:
    """The typed error for a Confluent ``error_code``; unknown codes keep the status they had."""
    cls = _BY_CODE.get(error_code)
    if cls is not None:
        return cls(message)
    err = UnexpectedResponseError(f"HTTP {http_status}, error_code {error_code}: {message}")
    err.http_status = http_status
    err.error_code = error_code
    return err


# --------------------------------------------------------------------------------------------
# Serde errors (Confluent wire format)
# --------------------------------------------------------------------------------------------


class SerdeError(SchemasError):
    """Base of the serializer/deserializer errors."""


class WrongMagicByteError(SerdeError):
    """The first byte is not the Confluent magic byte 0."""


class TruncatedPayloadError(SerdeError):
    """Fewer bytes than the 5-byte header, or the Avro body ended early."""


class UnknownSchemaIdError(SerdeError):
    """The registry has no schema under the id in the header."""


class UndecodableAvroError(SerdeError):
    """The body does not decode with the writer schema (or leaves bytes over)."""


class UnencodableRecordError(SerdeError):
    """The record does not match the serializer's schema."""


class RegistryConnectionError(SchemasError):
    """The client could not reach the registry (refused, timed out, DNS)."""


# --------------------------------------------------------------------------------------------
# Security configuration (TLS, HTTP Basic authentication), server and client side
# --------------------------------------------------------------------------------------------


class RegistrySecurityConfigError(SchemasError, ValueError):
    """A security key is missing, unknown, contradictory or names something Sluice refuses
    (a JKS keystore, ``CRYPT:`` passwords, ``SASL_INHERIT``)."""


class RegistryKeystoreError(RegistrySecurityConfigError):
    """A PEM key, certificate chain or CA file cannot be loaded."""


class UsersFileError(RegistrySecurityConfigError):
    """The JAAS file or the users (password) file it names cannot be read or parsed."""
