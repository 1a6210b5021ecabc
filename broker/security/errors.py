"""Errors of the security layer, one class per failure mode, none of them carrying a secret.

Two families, as in ``broker/protocol/errors.py`` (after h11):

1. **The peer failed** (``SaslError`` and its subclasses). Each names the Kafka error code the
   server answers with in the SaslAuthenticate response (``code``, a member of the registry
   ``sluice.broker.protocol.errors.Errors``); the
   server then closes the connection, as Kafka's ``SaslServerAuthenticator`` does. Their
   messages are written to be sent to the unauthenticated client as the response's
   ``error_message``: they never say whether a user exists, and never quote what the client
   sent (it may be a password).

   ============================  ==============================  ==========================
   class                         failure                         Kafka error code
   ============================  ==============================  ==========================
   ``SaslMessageError``          bytes that are not a valid      SASL_AUTHENTICATION_FAILED
                                 PLAIN / SCRAM message           (58)
   ``SaslAuthenticationError``   well-formed, but the            SASL_AUTHENTICATION_FAILED
                                 credentials are wrong, the      (58)
                                 user unknown, the authzid
                                 foreign or an extension
                                 unsupported
   ``SaslStateError``            a message after the exchange    ILLEGAL_SASL_STATE (34)
                                 completed or failed
   ``ScramServerProofError``     (client side) the server did    SASL_AUTHENTICATION_FAILED
                                 not prove it holds the          (58)
                                 credential
   ============================  ==============================  ==========================

2. **The configuration or stored data is wrong** (everything else; the TLS keys' errors are
   ``sluice.common.tls.TlsError``'s, shared with the registry, and a JAAS line's is
   ``sluice.common.jaas.JaasConfigError``, shared with the Spark source and sink: neither is a
   ``SecurityError``, so callers catch them beside it). Raised while a broker
   starts or a credential / ACL is read from its store; the messages name the key or znode
   and what was expected, never a password, a key or a stored credential.

Secrets never appear in ``str(exc)``, ``repr(exc)`` or ``exc.args``: messages are built from
key names, lengths and positions only. ``tests/broker/security/test_no_secret_leaks.py``
checks every raise site it can reach.
"""

from __future__ import annotations

from typing import ClassVar

from sluice.broker.protocol.errors import Errors

__all__ = [
    "SecurityError",
    "SaslError",
    "SaslMessageError",
    "SaslAuthenticationError",
    "SaslStateError",
    "ScramServerProofError",
    "ScramCredentialError",
    "CredentialFormatError",
    "AclBindingError",
    "AclZnodeError",
    "AclUpdateConflictError",
    "AuthorizerConfigError",
]


class SecurityError(Exception):
    """Base of every error of ``sluice.broker.security``."""


# --------------------------------------------------------------------------------------------
# The peer failed: answered with a Kafka error code, then the connection is closed
# --------------------------------------------------------------------------------------------


class SaslError(SecurityError):
    """A SASL exchange failed; ``code`` is the error the SaslAuthenticate response carries."""

    code: ClassVar[Errors] = Errors.SASL_AUTHENTICATION_FAILED


class SaslMessageError(SaslError):
    """The peer's bytes are not a valid message of the mechanism (RFC 4616 / RFC 5802)."""


class SaslAuthenticationError(SaslError):
    """Well-formed, but authentication fails (wrong password, unknown user, foreign authzid).

    Unknown user and wrong password give the same message, as Kafka's do, so that a client
    cannot learn which user names exist.
    """


class SaslStateError(SaslError):
    """A message arrived when the exchange expects none (completed or already failed)."""

    code: ClassVar[Errors] = Errors.ILLEGAL_SASL_STATE


class ScramServerProofError(SaslError):
    """Client side: the server's final message did not carry the expected signature.

    Either the server does not hold the user's credential or something altered the exchange.
    """


# --------------------------------------------------------------------------------------------
# The configuration or the stored data is wrong
# --------------------------------------------------------------------------------------------


class ScramCredentialError(SecurityError):
    """A SCRAM credential out of range: too few iterations, an empty salt, keys of bad size."""


class CredentialFormatError(SecurityError):
    """A stored SCRAM credential string or ``/config/users`` payload that does not parse."""


class AclBindingError(SecurityError):
    """An ACL binding or filter Kafka would refuse (bad code, pattern, principal, name)."""


class AclZnodeError(SecurityError):
    """A ``/kafka-acl`` payload or path that is not what Kafka writes."""


class AclUpdateConflictError(SecurityError):
    """A conditional ACL write lost to other writers as many times as the authorizer retries."""


class AuthorizerConfigError(SecurityError):
    """``authorizer.class.name``, ``super.users`` or ``allow.everyone.if.no.acl.found`` bad."""
