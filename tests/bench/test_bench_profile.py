"""bench.bench_profile's reading of py-spy's collapsed stacks; no broker, no py-spy."""

from __future__ import annotations

from bench.bench_profile import CATEGORIES, WAITING, category, parse_folded, summary

LOOP = (
    "_run_module_as_main (<frozen runpy>:198);main (sluice/cli/__init__.py:137);"
    "BaseEventLoop.run_forever (asyncio/base_events.py:607);"
    "BaseEventLoop._run_once (asyncio/base_events.py:1922);Handle._run (asyncio/events.py:80)"
)
CONN = LOOP + ";Connection._read_loop (broker/server/connection.py:143)"
FRAME = CONN + ";RequestDispatcher.handle_frame (broker/server/dispatcher.py:49)"
FOLDED = [
    FRAME + ";handle_produce (broker/server/handlers/produce.py:91);"
    "Log.append (broker/log/log.py:352) 6",
    FRAME + ";handle_produce (broker/server/handlers/produce.py:95);"
    "encode_produce_response (broker/protocol/produce_codec.py:20) 2",
    FRAME + ";decode_request (broker/protocol/codec.py:40);"
    "parse_request_header (broker/protocol/headers.py:5) 3",
    FRAME + " 1",
    CONN + ";flush_pending (broker/server/response_writer.py:75) 4",
    LOOP + ";_SelectorSocketTransport._read_ready (asyncio/selector_events.py:1000) 2",
    LOOP + " 1",
    "Thread._bootstrap (threading.py:995);LogFlusher.run (broker/log/log_manager.py:80) 1",
    "garbage without a count",
]
WAITS = [
    LOOP + ";EpollSelector.select (selectors.py:468) 5",
    "Thread._bootstrap (threading.py:995);LogManager._run_periodically "
    "(broker/log/log_manager.py:90);Event.wait (threading.py:622);"
    "Condition.wait (threading.py:324) 15",
]


def test_parse_folded_drops_line_numbers_and_merges_stacks() -> None:
    profile = parse_folded([FRAME + " 1", FRAME.replace(":613)", ":614)") + " 2", ""])
    assert profile.samples == 3
    assert len(profile.stacks) == 1
    assert (
        next(iter(profile.stacks))[-1]
        == "RequestDispatcher.handle_frame (broker/server/dispatcher.py)"
    )


def test_each_stack_goes_to_its_innermost_named_part_of_a_request() -> None:
    profile = parse_folded(FOLDED)
    assert profile.samples == 20
    assert [category(s) for s in profile.stacks] == [
        "handler", "encode", "decode", "dispatch", "write", "read", "event loop",
        "other threads",
    ]  # fmt: skip
    split = profile.split()
    assert list(split) == [*CATEGORIES, WAITING]
    assert split["handler"] == 30.0
    assert split[WAITING] == 0.0
    assert sum(split.values()) == 100.0


def test_waits_are_left_out_of_the_busy_shares_and_counted_apart() -> None:
    profile = parse_folded(FOLDED + WAITS)
    assert (profile.samples, profile.busy) == (40, 20)
    split = profile.split()
    assert split["handler"] == 30.0  # of the 20 busy samples, as without the waits
    assert split[WAITING] == 50.0  # of all 40
    assert "Condition.wait (threading.py)" not in profile.own()
    assert "EpollSelector.select (selectors.py)" not in profile.total()


def test_own_and_total_time() -> None:
    profile = parse_folded(FOLDED)
    assert profile.own()["Log.append (broker/log/log.py)"] == 6
    assert profile.total()["RequestDispatcher.handle_frame (broker/server/dispatcher.py)"] == 12
    text = summary("produce batch 1", profile, "what ran", "1 msg/s")
    assert text.splitlines()[0] == "produce batch 1: what ran; 1 msg/s"
    assert "30.0%  Log.append (broker/log/log.py)" in text
    # The scaffolding every loop sample has is not ranked by total time.
    total = text.split("total time")[1]
    assert "run_forever" not in total
    assert "60.0%  RequestDispatcher.handle_frame (broker/server/dispatcher.py)" in total


def test_the_response_writers_own_frames_count_as_write() -> None:
    """``_send_slice``, ``_cork`` and the rest of ``response_writer`` put responses on the
    socket: write, not the handler their file's package would suggest."""
    for frame in ("_send_slice (broker/server/response_writer.py:170)",
                  "_cork (broker/server/response_writer.py:91)"):  # fmt: skip
        stack = CONN + ";write_response (broker/server/response_writer.py:113);" + frame
        profile = parse_folded([stack + " 1"])
        assert [category(s) for s in profile.stacks] == ["write"]
