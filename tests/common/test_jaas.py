"""sluice.common.jaas: Kafka's JAAS lines, tokenized as java.io.StreamTokenizer does for Kafka."""

from __future__ import annotations

import pytest

from sluice.common.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    ControlFlag,
    JaasConfigError,
    parse_jaas_config,
    parse_jaas_entries,
)

PLAIN_LINE = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="s3cr3t" user_admin="s3cr3t" user_alice="a-pass";'
)


def test_plain_line_from_kafka_docs() -> None:
    entry = parse_jaas_config(PLAIN_LINE)
    assert entry.login_module == PLAIN_LOGIN_MODULE
    assert entry.control_flag is ControlFlag.REQUIRED
    assert entry.username == "admin" and entry.password == "s3cr3t"
    assert dict(entry.plain_users) == {"admin": "s3cr3t", "alice": "a-pass"}


def test_scram_line_with_single_quotes_unquoted_values_and_line_breaks() -> None:
    entry = parse_jaas_config(
        f"{SCRAM_LOGIN_MODULE}\n  REQUIRED\n  username=broker\n  password='p w';\n"
    )
    assert entry.login_module == SCRAM_LOGIN_MODULE
    assert entry.control_flag is ControlFlag.REQUIRED
    assert (entry.username, entry.password) == ("broker", "p w")
    assert dict(entry.plain_users) == {}


@pytest.mark.parametrize(
    ("quoted", "value"),
    [
        (r'"a\"b"', 'a"b'),
        (r'"back\\slash"', "back\\slash"),
        (r'"tab\tnew\nline"', "tab\tnew\nline"),
        (r'"\101\60\0"', "A0\x00"),  # octal, up to three digits, \377 at most
        (r'"\477"', "\x277"),  # first digit > 3: two digits only
        (r'"\q"', "q"),  # any other escaped character is itself
        ("'single \"inside\"'", 'single "inside"'),
        ('"semi;colon=equals /slash"', "semi;colon=equals /slash"),
        ('"ünïcødé"', "ünïcødé"),
    ],
)
def test_quoted_values_and_escapes(quoted: str, value: str) -> None:
    entry = parse_jaas_config(f"M required password={quoted};")
    assert entry.password == value


def test_comments_and_slash_ends_an_unquoted_word() -> None:
    entry = parse_jaas_config(
        "/* a comment */ M required // to the end of the line\n"
        "username=abc/ignored to the line end\n password=x;"
    )
    assert (entry.username, entry.password) == ("abc", "x")


def test_quoted_string_ends_at_a_line_end_as_in_java() -> None:
    entry = parse_jaas_config('M required username="unterminated\n password=x;')
    assert (entry.username, entry.password) == ("unterminated", "x")


def test_repeated_key_keeps_the_last_and_flags_are_case_insensitive() -> None:
    entry = parse_jaas_config("M Optional a=1 a=2;")
    assert entry.control_flag is ControlFlag.OPTIONAL
    assert dict(entry.options) == {"a": "2"}


def test_several_entries_parse_but_a_config_value_needs_exactly_one() -> None:
    assert len(parse_jaas_entries("A required; B sufficient x=y;")) == 2
    with pytest.raises(JaasConfigError, match="expected 1 login module.*found 2"):
        parse_jaas_config("A required; B sufficient x=y;")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "found no entry"),
        ("   // only a comment", "found no entry"),
        ("M", "control flag at character 1, found the end of the text"),
        ("M mandatory;", "expected a control flag"),
        ('M required password="x"', "expected ';'"),
        ("M required password;", "after the option name at character 11, found ';'"),
        ("M required password=;", "found ';'"),
        ("M required =x;", "expected an option name"),
        ("; M required;", "expected a login module class name at character 0, found ';'"),
        ("M required a=\x85;", r"control character U\+0085"),
    ],
)
def test_malformed_lines(line: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message):
        parse_jaas_config(line)


def test_errors_and_repr_never_quote_values() -> None:
    secret = "hunter2-very-secret"
    for line in (
        f"M required password={secret}",
        f'M required password="{secret}" user_bob "{secret}";',
        f'M {secret} password="x";',
        f'"{secret}"',
        f"M required password = = {secret};",
    ):
        with pytest.raises(JaasConfigError) as caught:
            parse_jaas_config(line)
        assert secret not in str(caught.value) and secret not in repr(caught.value)
    entry = parse_jaas_config(f'M required username=u password="{secret}" user_u="{secret}";')
    assert secret not in repr(entry) and secret not in str(entry)
    assert "password" in repr(entry)
