"""JAAS login configuration files, as Confluent's registry is given them."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.schemas.errors import UsersFileError
from sluice.schemas.jaas_file import JaasFile


def read(tmp_path: Path, text: str) -> JaasFile:
    path = tmp_path / "jaas.conf"
    path.write_text(text, encoding="utf-8")
    return JaasFile.read(path)


def test_confluent_example_with_other_entries(tmp_path: Path) -> None:
    jaas = read(
        tmp_path,
        """
        // the broker's entry, in the same file
        KafkaServer {
          org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="admin-secret"
            user_admin="admin-secret";
        };
        /* the registry's */
        SchemaRegistry-Props {
          org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required
          file="/etc/schema-registry/password file"
          debug="false";
        };
        """,
    )
    assert sorted(jaas.entries) == ["KafkaServer", "SchemaRegistry-Props"]
    (module,) = jaas.entries["SchemaRegistry-Props"]
    assert module.class_name == "org.eclipse.jetty.jaas.spi.PropertyFileLoginModule"
    assert module.flag == "required"
    assert module.options == {"file": "/etc/schema-registry/password file", "debug": "false"}
    assert jaas.entries["KafkaServer"][0].options["user_admin"] == "admin-secret"
    assert "admin-secret" not in repr(jaas)


def test_escapes_and_bare_values(tmp_path: Path) -> None:
    jaas = read(tmp_path, 'R { M sufficient file=/a/b quoted="x\\"y\\\\z"; };')
    assert jaas.entries["R"][0].options == {"file": "/a/b", "quoted": 'x"y\\z'}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('R { M required password="s3cret" }; ', r"line 1: expected an option name or ';'"),
        ('R { M mandatory password="s3cret"; };', r"line 1: expected a flag"),
        ('R {\n M required\n password "s3cret"; };', r"line 3: expected '=' after the option"),
        ('R { M required password="s3cret;', r"line 1: expected a closing quote"),
        ('R { M required password="s3cret"; }', r"expected ';' after the entry 'R' before"),
        ("R { M required; };\nR { M required; };", r"line 2: expected one entry named 'R'"),
    ],
)
def test_syntax_errors_name_the_line_never_a_value(
    tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises(UsersFileError, match=expected) as e:
        read(tmp_path, text)
    assert "s3cret" not in str(e.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsersFileError, match="no such file"):
        JaasFile.read(tmp_path / "absent.conf")
