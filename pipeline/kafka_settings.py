"""A Java client's Kafka settings as librdkafka's: for the source's and the load's consumers and
the sink's producers.

Spark hands every ``kafka.<key>`` option of its Kafka source and sink to the Java client as
``<key>`` (and the nightly load's ``kafka.*`` keys are the source's); Sluice's clients are
librdkafka's (confluent-kafka), which shares most keys with Java but not all. Users carry their
Spark jobs' options over, so :func:`translate_java_settings` answers each key (``kafka.`` cut,
lower case) in one of three ways:

1. **Java-only, with a librdkafka equivalent**: translated —
   ``sasl.jaas.config`` (parsed by ``sluice.common.jaas``) with ``PlainLoginModule`` →
   ``sasl.username`` / ``sasl.password`` (``sasl.mechanism`` PLAIN); with ``ScramLoginModule``
   → the same, ``sasl.mechanism`` from ``kafka.sasl.mechanism`` (SCRAM-SHA-256 or
   SCRAM-SHA-512, required); with ``Krb5LoginModule`` ``useKeyTab=true`` →
   ``sasl.kerberos.keytab`` / ``sasl.kerberos.principal`` (GSSAPI). ``ssl.truststore.location``
   with ``ssl.truststore.type=PEM`` → ``ssl.ca.location``; ``ssl.truststore.certificates`` →
   ``ssl.ca.pem``; ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` (PEM) →
   ``ssl.key.pem`` / ``ssl.certificate.pem``; ``ssl.keystore.location`` of type PKCS12 stays
   (librdkafka's keystore is PKCS#12); ``ssl.endpoint.identification.algorithm`` empty →
   ``none``; ``send.buffer.bytes`` / ``receive.buffer.bytes`` → ``socket.*.buffer.bytes``;
   ``fetch.max.wait.ms`` → ``fetch.wait.max.ms``; ``partition.assignment.strategy`` class
   names → librdkafka's assignor names.
2. **Java-only, no equivalent**: ``JavaOnlyKafkaOptionError`` saying what to use instead
   (a JKS truststore: convert it to PEM and set ``kafka.ssl.ca.location``; JCA providers,
   login callback classes, Java metrics reporters, ``max.poll.records``, ...).
3. **Anything else** goes to librdkafka as it is (which refuses a key it does not know).

What only one side refuses or adds stays with it: the source's Spark refusals, isolation level
and group ids (``sluice.pipeline.source.kafka_params``), the sink's serializers and producer
defaults (``sluice.pipeline.sink.options``).

No message quotes a value: JAAS lines, passwords and PEM keys are secrets. A leaf of
``sluice.pipeline``: it imports ``sluice.common`` only, so the source, the sink and the load
share it without importing each other. Pure functions over constants; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping

from sluice.common.jaas import (
    KRB5_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfigError,
    parse_jaas_config,
)

__all__ = [
    "JaasTranslationError",
    "JavaOnlyKafkaOptionError",
    "translate_java_settings",
]


class JavaOnlyKafkaOptionError(ValueError):
    """A ``kafka.*`` option of Java's client that librdkafka has no equivalent for."""


class JaasTranslationError(ValueError):
    """``kafka.sasl.jaas.config`` does not parse, or has no librdkafka equivalent."""


_RENAMED = {
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.key": "ssl.key.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
}

_REMOVE = "remove it"
_JAVA_ONLY = {
    "ssl.protocol": "librdkafka negotiates the TLS version with OpenSSL; " + _REMOVE,
    "ssl.enabled.protocols": "librdkafka negotiates the TLS version with OpenSSL; " + _REMOVE,
    "ssl.provider": "a Java security provider; " + _REMOVE,
    "security.providers": "Java security providers; " + _REMOVE,
    "ssl.keymanager.algorithm": "a Java KeyManager; " + _REMOVE,
    "ssl.trustmanager.algorithm": "a Java TrustManager; " + _REMOVE,
    "ssl.secure.random.implementation": "a Java SecureRandom; " + _REMOVE,
    "ssl.engine.factory.class": "a Java class; " + _REMOVE,
    "sasl.login.class": "a Java class; librdkafka logs in by sasl.mechanism",
    "sasl.login.callback.handler.class": (
        "a Java class; for OAUTHBEARER set kafka.sasl.oauthbearer.method=oidc with "
        "kafka.sasl.oauthbearer.client.id, .client.secret and .token.endpoint.url"
    ),
    "sasl.client.callback.handler.class": "a Java class; " + _REMOVE,
    "max.poll.records": "the source reads arrowBatchRows records per batch; set that instead",
    "default.api.timeout.ms": (
        "use the source option kafkaConsumer.pollTimeoutMs, or kafka.socket.timeout.ms"
    ),
    "exclude.internal.topics": "the source never reads internal (__) topics; " + _REMOVE,
    "socket.connection.setup.timeout.max.ms": "use kafka.socket.connection.setup.timeout.ms",
    "metric.reporters": "librdkafka reports through kafka.statistics.interval.ms; " + _REMOVE,
    "metrics.num.samples": "librdkafka reports through kafka.statistics.interval.ms; " + _REMOVE,
    "metrics.sample.window.ms": (
        "librdkafka reports through kafka.statistics.interval.ms; " + _REMOVE
    ),
    "metrics.recording.level": (
        "librdkafka reports through kafka.statistics.interval.ms; " + _REMOVE
    ),
    "auto.include.jmx.reporter": "there is no JMX in librdkafka; " + _REMOVE,
    "sasl.kerberos.ticket.renew.window.factor": (
        "librdkafka renews with kinit; use kafka.sasl.kerberos.min.time.before.relogin"
    ),
    "sasl.kerberos.ticket.renew.jitter": (
        "librdkafka renews with kinit; use kafka.sasl.kerberos.min.time.before.relogin"
    ),
}
for _key in (
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms",
    "sasl.login.retry.backoff.max.ms",
):
    _JAVA_ONLY[_key] = "Java's login refresh tuning; librdkafka refreshes on its own; " + _REMOVE

_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
}


def _java_only(key: str, advice: str) -> JavaOnlyKafkaOptionError:
    return JavaOnlyKafkaOptionError(
        f"option 'kafka.{key}': expected a librdkafka setting, found a Java-client-only one: "
        f"{advice}"
    )


def _jaas(params: dict[str, str], jaas: str) -> None:
    """Replace ``sasl.jaas.config`` in ``params`` by librdkafka's settings."""
    try:
        entry = parse_jaas_config(jaas)
    except JaasConfigError as exc:  # its message gives positions, never the text
        raise JaasTranslationError(f"option 'kafka.sasl.jaas.config': {exc}") from None
    mechanism = params.get("sasl.mechanism", "").strip().upper()
    module = entry.login_module
    short = module.rsplit(".", 1)[-1]
    if module in (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE):
        allowed: tuple[str, ...]
        if module == PLAIN_LOGIN_MODULE:
            allowed, default = ("PLAIN",), "PLAIN"
        else:
            allowed, default = ("SCRAM-SHA-256", "SCRAM-SHA-512"), ""
        if not mechanism and default:
            mechanism = default
        if mechanism not in allowed:
            raise JaasTranslationError(
                f"option 'kafka.sasl.mechanism': expected {' or '.join(allowed)} for {short}, "
                f"found {mechanism or 'none'}"
            )
        missing = [k for k in ("username", "password") if not entry.options.get(k)]
        if missing:
            raise JaasTranslationError(
                f"option 'kafka.sasl.jaas.config': expected {short} options username and "
                f"password, found no {' or '.join(missing)}"
            )
        for key in ("sasl.username", "sasl.password"):
            if key in params:
                raise JaasTranslationError(
                    f"options 'kafka.sasl.jaas.config' and 'kafka.{key}': expected one of "
                    "them, found both"
                )
        params["sasl.username"] = entry.options["username"]
        params["sasl.password"] = entry.options["password"]
        params["sasl.mechanism"] = mechanism
    elif module == KRB5_LOGIN_MODULE and entry.options.get("useKeyTab", "").lower() == "true":
        if not entry.options.get("keyTab") or not entry.options.get("principal"):
            raise JaasTranslationError(
                "option 'kafka.sasl.jaas.config': expected Krb5LoginModule options keyTab and "
                "principal with useKeyTab=true, found them incomplete"
            )
        params["sasl.kerberos.keytab"] = entry.options["keyTab"]
        params["sasl.kerberos.principal"] = entry.options["principal"]
        params["sasl.mechanism"] = mechanism or "GSSAPI"
    else:
        raise JaasTranslationError(
            f"option 'kafka.sasl.jaas.config': expected PlainLoginModule, ScramLoginModule or "
            f"Krb5LoginModule with useKeyTab=true, found {short}; set librdkafka's settings "
            "instead (kafka.sasl.username / kafka.sasl.password, kafka.sasl.oauthbearer.*, "
            "kafka.sasl.kerberos.*)"
        )


def _truststore(params: dict[str, str], raw: Mapping[str, str]) -> None:
    kind = raw.get("ssl.truststore.type", "JKS").strip().upper()
    location = raw.get("ssl.truststore.location")
    if location is None and "ssl.truststore.password" not in raw:
        return
    if kind != "PEM":
        raise _java_only(
            "ssl.truststore.location",
            f"librdkafka reads no {kind} truststore; convert it to PEM (keytool -exportcert "
            "-rfc -keystore <truststore> -alias <ca> > ca.pem) and set kafka.ssl.ca.location",
        )
    if "ssl.truststore.password" in raw:
        raise _java_only(
            "ssl.truststore.password", "a PEM truststore takes no password; " + _REMOVE
        )
    assert location is not None
    params["ssl.ca.location"] = location


def _keystore(params: dict[str, str], raw: Mapping[str, str]) -> None:
    kind = raw.get("ssl.keystore.type")
    if kind is None or "ssl.keystore.location" not in raw:
        return  # without a type, ssl.keystore.location is librdkafka's own (PKCS#12) key
    kind = kind.strip().upper()
    if kind == "PKCS12":
        return
    advice = (
        "convert it to PKCS#12 (keytool -importkeystore -deststoretype PKCS12) and set "
        "kafka.ssl.keystore.type=PKCS12"
        if kind == "JKS"
        else "set kafka.ssl.certificate.location and kafka.ssl.key.location to its PEM files"
    )
    raise _java_only("ssl.keystore.location", f"librdkafka reads no {kind} keystore; {advice}")


def translate_java_settings(raw: Mapping[str, str]) -> dict[str, str]:
    """Java client settings (``kafka.`` cut, keys lower case) as librdkafka's: see the module
    doc. Raises ``JavaOnlyKafkaOptionError`` or ``JaasTranslationError``."""
    params: dict[str, str] = {}
    for key, value in sorted(raw.items()):
        if key in _JAVA_ONLY:
            raise _java_only(key, _JAVA_ONLY[key])
        if key in _RENAMED:
            params[_RENAMED[key]] = value
        elif key == "ssl.endpoint.identification.algorithm":
            params[key] = value.strip().lower() or "none"
        elif key == "partition.assignment.strategy":
            names = [n.strip() for n in value.split(",") if n.strip()]
            params[key] = ",".join(_ASSIGNORS.get(n.lower(), n) for n in names)
        elif key.startswith("ssl.truststore.") or key in ("sasl.jaas.config", "ssl.keystore.type"):
            continue  # translated below, from several keys at once
        else:
            params[key] = value
    _truststore(params, raw)
    _keystore(params, raw)
    if "sasl.jaas.config" in raw:
        _jaas(params, raw["sasl.jaas.config"])
    return params
