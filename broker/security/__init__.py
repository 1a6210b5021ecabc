"""Kafka's security, sans-IO: JAAS lines, SASL PLAIN and SCRAM, ACLs, TLS contexts.

Bytes in, bytes out; no sockets. The server (``broker/server``) owns the connections and
drives these pieces; this package only decides.

Modules, each named after what it holds:

- ``errors``            one exception per failure mode; the SASL ones carry Kafka's error code
- ``jaas``              ``sasl.jaas.config`` parsed as Kafka's ``JaasConfig``; PLAIN's users
- ``plain``             SASL PLAIN (RFC 4616) against a JAAS user table
- ``scram_credential``  SCRAM mechanisms, salted credentials, Kafka's stored forms
- ``scram``             the SCRAM exchange: server and client state machines (RFC 5802/7677)
- ``acl``               ACL bindings and filters with Kafka's codes; ``/kafka-acl`` payloads
- ``authorizer``        Kafka's ACL decision, its cache, and the ``AclStore`` interface
- ``tls``               a listener's ``ssl.*`` keys; a peer certificate's principal (contexts:
                        ``sluice.common.tls``)
- ``scram_store``       SCRAM credentials of a standalone broker, in a file beside its metadata
- ``acl_store``         the ACLs: Kafka's ``/kafka-acl`` znodes and change notifications in
                        cluster mode, ``sluice-acls.json`` beside a standalone broker's metadata

Where each piece sits in a connection's life (the wiring, in ``broker/server``):

1. accept; on an ``SSL``/``SASL_SSL`` listener wrap with ``tls.listener_server_context`` and,
   once the handshake is done, the principal is ``tls.peer_principal`` (``User:ANONYMOUS`` without a
   client certificate);
2. on ``SASL_*`` listeners only ApiVersions and SaslHandshake are served until SaslAuthenticate
   succeeds: ``plain.PlainAuthenticator.authenticate`` (one message) or a
   ``scram.ScramServer`` per connection (two messages); a ``SaslError`` answers with its
   ``code`` and closes; success makes the principal ``User:<name>``;
3. every later request is checked with ``authorizer.AclAuthorizer.authorize`` when
   ``authorizer.class.name`` asks for it (``sluice.broker.server.authorization``).
"""
