import re

import pytest

from sluice.common.properties import (
    PropertiesError,
    PropertyEntry,
    load_properties,
    parse_properties,
    property_entries,
)


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


def test_a_bad_unicode_escape_is_a_properties_error_naming_its_line_not_its_text(tmp_path):
    text = "# passwords\nuser=alice\npassword=hunter\\u00zz2\n"
    with pytest.raises(PropertiesError, match=r"line 3: expected \\u and four hex digits") as e:
        parse_properties(text)
    assert "hunter" not in str(e.value) and "00zz" not in str(e.value)
    path = tmp_path / "server.properties"
    path.write_text(text)
    with pytest.raises(PropertiesError, match=re.escape(f"config file {path}, line 3: ")):
        load_properties(path)


def test_entries_keep_order_repeats_and_the_line_each_starts_on():
    text = "# c\na=1\r\nb=2\rlist=x,\\\n  y\n\n! c\na=3"
    assert property_entries(text) == [
        PropertyEntry(2, "a", "1"),
        PropertyEntry(3, "b", "2"),  # \r\n and a lone \r are one line break each, as in Java
        PropertyEntry(4, "list", "x,y"),
        PropertyEntry(8, "a", "3"),
    ]
    assert parse_properties(text) == {"a": "3", "b": "2", "list": "x,y"}


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
