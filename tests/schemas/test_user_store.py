"""The users file of Jetty's PropertyFileLoginModule: formats, refusals, and checks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sluice.schemas.errors import UsersFileError
from sluice.schemas.user_store import UserStore, deobfuscate, obfuscate

# Jetty's documented example (``java org.eclipse.jetty.util.security.Password me you``) and
# Confluent's: the same credential in each form.
JETTY_OBF_YOU = "OBF:20771x1b206z"
JETTY_MD5_YOU = "MD5:639bae9ac6b3e1a84cebb7b403297b79"
JETTY_CRYPT_YOU = "CRYPT:me/ks90E221EY"
CONFLUENT_OBF_LETMEIN = "OBF:1w8t1tvf1w261w8v1w1c1tvn1w8x"


def store(tmp_path: Path, text: str) -> UserStore:
    path = tmp_path / "password-file"
    path.write_text(text, encoding="utf-8")
    return UserStore.read(path)


def test_jetty_vectors() -> None:
    assert deobfuscate(JETTY_OBF_YOU) == "you"
    assert obfuscate("you") == JETTY_OBF_YOU
    assert deobfuscate(CONFLUENT_OBF_LETMEIN) == "letmein"
    assert "MD5:" + hashlib.md5(b"you").hexdigest() == JETTY_MD5_YOU


@pytest.mark.parametrize("password", ["", "a", "pässwörd ✓", "x" * 100, "with:colon"])
def test_obfuscation_round_trips(password: str) -> None:
    assert deobfuscate(obfuscate(password)) == password


def test_every_accepted_form(tmp_path: Path) -> None:
    users = store(
        tmp_path,
        "# user: credential[,role ...]\n"
        "plain: secret-1,admin, developer\n"
        "\n"
        f"hashed = {JETTY_MD5_YOU},user\n"
        f"obfuscated: {JETTY_OBF_YOU}\n"
        "spaced :  secret with spaces , user\n",
    )
    assert len(users) == 4
    plain = users.authenticate("plain", "secret-1")
    assert plain is not None and plain.roles == {"admin", "developer"}
    hashed = users.authenticate("hashed", "you")
    assert hashed is not None and hashed.roles == {"user"}
    obfuscated = users.authenticate("obfuscated", "you")
    assert obfuscated is not None and obfuscated.roles == frozenset()
    assert users.authenticate("spaced", "secret with spaces") is not None


def test_wrong_password_and_unknown_user_look_the_same(tmp_path: Path) -> None:
    users = store(tmp_path, f"alice: secret\nbob: {JETTY_MD5_YOU}\n")
    assert users.authenticate("alice", "secret ") is None
    assert users.authenticate("alice", "") is None
    assert users.authenticate("bob", "me") is None
    assert users.authenticate("mallory", "secret") is None
    assert users.authenticate("Alice", "secret") is None  # names are case-sensitive


def test_no_credential_in_repr(tmp_path: Path) -> None:
    user = store(tmp_path, "alice: hunter2,admin\n").authenticate("alice", "hunter2")
    assert user is not None
    assert "hunter2" not in repr(user)
    assert hashlib.sha256(b"hunter2").hexdigest() not in repr(user)
    assert repr(hashlib.sha256(b"hunter2").digest()) not in repr(user)


def test_crypt_is_refused_with_the_line_and_user(tmp_path: Path) -> None:
    with pytest.raises(UsersFileError, match=r"line 3, user 'me': CRYPT: passwords are not") as e:
        store(tmp_path, "# users\nalice: secret\nme: " + JETTY_CRYPT_YOU + ",admin\n")
    assert "ks90E221EY" not in str(e.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice: MD5:1234\n", "expected MD5: and 32 hex digits"),
        ("alice: MD5:" + "z" * 32 + "\n", "expected MD5: and 32 hex digits"),
        ("alice: OBF:!!!!secret\n", "expected Jetty's OBF: encoding"),
        ("alice:\n", "expected 'user: password"),
        ("alice: ,admin\n", "expected 'user: password"),
    ],
)
def test_malformed_lines_are_named_not_quoted(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(UsersFileError, match=expected) as e:
        store(tmp_path, text)
    assert "line 1, user 'alice'" in str(e.value)
    assert "secret" not in str(e.value) and "1234" not in str(e.value)


def test_a_bad_escape_names_the_line_not_the_text(tmp_path: Path) -> None:
    with pytest.raises(UsersFileError, match=r"password-file, line 2: expected \\u") as e:
        store(tmp_path, "# users\nalice: secret\\u12xy,admin\n")
    assert "secret" not in str(e.value) and "12xy" not in str(e.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsersFileError, match="no such file"):
        UserStore.read(tmp_path / "absent")
