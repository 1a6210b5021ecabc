import pytest

from sluice.common.properties import PropertiesError, load_properties, parse_properties


def test_kafka_style_properties():
    text = r"""
# a comment
! another
broker.id=1
listeners = PLAINTEXT://127.0.0.1:9092
log.dirs: /tmp/a,/tmp/b
num.partitions 3
long.value=one,\
    two
escaped\=key=a\tb
empty=
"""
    assert parse_properties(text) == {
        "broker.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "log.dirs": "/tmp/a,/tmp/b",
        "num.partitions": "3",
        "long.value": "one,two",
        "escaped=key": "a\tb",
        "empty": "",
    }


def test_overrides_win(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nlog.dirs=/a\n")
    props = load_properties(path, ["log.dirs=/b", "zookeeper.connect=127.0.0.1:2181"])
    assert props == {"broker.id": "1", "log.dirs": "/b", "zookeeper.connect": "127.0.0.1:2181"}
    with pytest.raises(PropertiesError, match="expected --override key=value"):
        load_properties(None, ["nonsense"])
    with pytest.raises(PropertiesError, match="does not exist"):
        load_properties(tmp_path / "missing.properties")


def test_unicode_escapes_and_surrogate_pairs():
    assert parse_properties(r"name=caf\u00e9" + "\n" + r"emoji=\ud83d\ude00") == {
        "name": "café",
        "emoji": "😀",
    }


def test_a_bad_unicode_escape_is_a_properties_error():
    with pytest.raises(PropertiesError, match="escape"):
        parse_properties(r"name=\u00zz")


def test_continuation_lines_drop_the_next_lines_leading_blanks():
    text = "list = a,\\\n      b,\\\n\tc\nafter=1\n"
    assert parse_properties(text) == {"list": "a,b,c", "after": "1"}


def test_colon_and_whitespace_separators_and_escaped_separators_in_keys():
    text = "a:1\nb 2\nc : 3\nd\\:e=4\nf\\ g=5\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d:e": "4", "f g": "5"}


def test_an_even_number_of_backslashes_does_not_continue():
    assert parse_properties("path=C:\\\\\nnext=1\n") == {"path": "C:\\", "next": "1"}


def test_a_non_utf8_file_is_refused_with_its_path(tmp_path):
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"name=caf\xe9\n")
    with pytest.raises(PropertiesError, match="expected UTF-8 text"):
        load_properties(path)
