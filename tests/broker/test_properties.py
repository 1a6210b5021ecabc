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
