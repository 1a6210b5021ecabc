"""The registry in cluster mode: ZooKeeperSchemaStore against a real ZooKeeper.

Store level: atomic transactions (a rollback or a refused commit leaves no partial writes), ids
from a sequence that is never reused, the lock that serializes writers. Process level: two
registry processes on one ZooKeeper chroot registering concurrently, and restarted.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from sluice.schemas import schema_path
from sluice.schemas.client import RegistryClient
from sluice.schemas.errors import StoreError
from sluice.schemas.server import RegistryConfig
from sluice.schemas.store import StoredSchema, SubjectVersion
from sluice.schemas.zk_store import BASE_PATH, ZooKeeperSchemaStore
from sluice.testing.net import free_port
from sluice.testing.registry import RegistryProcess
from sluice.testing.zookeeper import ZooKeeperServer

AUDIT = json.loads(schema_path("audit_count").read_text())


def variant(tag: str) -> str:
    """A schema distinct per ``tag`` and compatible with every other variant (only doc differs)."""
    return json.dumps(dict(AUDIT, doc=f"variant {tag}"))


def tree(client: KazooClient, path: str = "/") -> dict[str, bytes]:
    """Every znode under ``path`` (the client's chroot) with its data, lock nodes excluded."""
    nodes: dict[str, bytes] = {}

    def walk(p: str) -> None:
        data, _ = client.get(p)
        nodes[p] = data
        for child in client.get_children(p):
            walk(p.rstrip("/") + "/" + child)

    walk(path)
    lock = f"{BASE_PATH}/lock/"
    return {p: d for p, d in nodes.items() if not p.startswith(lock)}


@pytest.fixture
def open_store(zk_connect: str) -> Iterator[Callable[..., ZooKeeperSchemaStore]]:
    """``open_store(**kwargs)``: a store on the test's chroot, closed at teardown."""
    opened: list[ZooKeeperSchemaStore] = []

    def open_(**kwargs: float) -> ZooKeeperSchemaStore:
        store = ZooKeeperSchemaStore(zk_connect, **kwargs)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


# -- store level -----------------------------------------------------------------------------


def test_state_survives_reopen(open_store: Callable[..., ZooKeeperSchemaStore]) -> None:
    store = open_store()
    with store.transaction():
        sid = store.allocate_id()
        store.put_schema(StoredSchema(sid, '"string"', "fp1"))
        store.put_version(SubjectVersion("s", 1, sid))
        store.put_version(SubjectVersion("s", 2, sid, deleted=True))
    store.put_config(None, "FULL")
    store.put_config("s", "NONE")
    store.close()

    store = open_store()
    assert store.get_schema(sid) == StoredSchema(sid, '"string"', "fp1", "AVRO")
    assert store.find_schema("fp1") == store.get_schema(sid)
    assert store.find_schema("fp2") is None
    assert store.subjects() == ["s"]
    assert store.versions("s") == [
        SubjectVersion("s", 1, sid),
        SubjectVersion("s", 2, sid, deleted=True),
    ]
    assert (store.get_config(None), store.get_config("s")) == ("FULL", "NONE")
    store.delete_config("s")
    assert store.get_config("s") is None


def test_ids_are_unique_across_stores_and_never_reused(
    open_store: Callable[..., ZooKeeperSchemaStore],
) -> None:
    stores = [open_store(), open_store()]

    def allocate(store: ZooKeeperSchemaStore) -> list[int]:
        return [store.allocate_id() for _ in range(25)]

    # Stores are not thread-safe; one thread per store, both at once.
    with ThreadPoolExecutor(2) as pool:
        ids = [i for batch in pool.map(allocate, stores) for i in batch]
    assert sorted(ids) == list(range(1, 51))

    store = stores[0]
    store.put_schema(StoredSchema(50, '"int"', "a"))
    store.delete_schema(50)
    assert store.get_schema(50) is None and store.find_schema("a") is None
    for s in stores:
        s.close()
    assert open_store().allocate_id() == 51


def test_rollback_leaves_no_partial_writes(
    open_store: Callable[..., ZooKeeperSchemaStore], zk_client: KazooClient
) -> None:
    store = open_store()
    sid = store.allocate_id()
    store.put_schema(StoredSchema(sid, '"int"', "fp-int"))
    store.put_version(SubjectVersion("s", 1, sid))
    before = tree(zk_client)

    with pytest.raises(RuntimeError, match="abort"), store.transaction():
        burned = store.allocate_id()
        store.put_schema(StoredSchema(burned, '"long"', "fp-long"))
        store.put_version(SubjectVersion("s", 2, burned))
        store.put_version(SubjectVersion("t", 1, burned))
        store.put_version(SubjectVersion("s", 1, sid, deleted=True))
        store.put_config("s", "FULL")
        store.delete_schema(sid)
        # Reads inside the block see its writes...
        assert store.find_schema("fp-long") == StoredSchema(burned, '"long"', "fp-long")
        assert store.subjects() == ["s", "t"]
        assert [v.version for v in store.versions("s")] == [1, 2]
        assert store.get_schema(sid) is None
        raise RuntimeError("abort")

    # ...and none of them reached ZooKeeper. Only the allocated id is used up (never reused).
    after = tree(zk_client)
    counter = f"{BASE_PATH}/schema_id_counter/id-{burned - 1:010d}"
    assert set(after) - set(before) == {counter}
    assert {p: d for p, d in after.items() if p != counter} == before
    assert store.versions("s") == [SubjectVersion("s", 1, sid)]
    assert store.get_config("s") is None
    assert store.allocate_id() == burned + 1


def test_refused_commit_writes_nothing(
    open_store: Callable[..., ZooKeeperSchemaStore], zk_client: KazooClient
) -> None:
    """A writer that lost the lock without noticing (simulated: another client writes behind
    the lock's back) cannot commit over the other's write; none of its multi is applied."""
    store = open_store()
    sid = store.allocate_id()
    store.put_schema(StoredSchema(sid, '"int"', "fp-int"))
    store.put_version(SubjectVersion("s", 1, sid))
    intruder = json.dumps({"version": 1, "id": sid, "deleted": False}).encode()
    with pytest.raises(StoreError, match="commit refused"), store.transaction():
        other = store.allocate_id()
        store.put_schema(StoredSchema(other, '"long"', "fp-long"))
        store.put_config("s", "FULL")
        assert [v.version for v in store.versions("s")] == [1]  # so version 2 is free...
        zk_client.create(f"{BASE_PATH}/subjects/s/versions/2", intruder)  # ...until now
        store.put_version(SubjectVersion("s", 2, other))  # a create, not an overwrite
    assert store.get_schema(other) is None
    assert store.find_schema("fp-long") is None
    assert store.get_config("s") is None
    assert store.versions("s") == [SubjectVersion("s", 1, sid), SubjectVersion("s", 2, sid)]


def test_references_must_exist(open_store: Callable[..., ZooKeeperSchemaStore]) -> None:
    store = open_store()
    with pytest.raises(StoreError, match="schema id 5 was not allocated"):
        store.put_schema(StoredSchema(5, '"int"', "x"))
    with pytest.raises(StoreError, match="refers to schema 7, which does not exist"):
        store.put_version(SubjectVersion("s", 1, 7))
    assert store.subjects() == []


def test_permanent_removal_leaves_no_empty_subject(
    open_store: Callable[..., ZooKeeperSchemaStore], zk_client: KazooClient
) -> None:
    store = open_store()
    sid = store.allocate_id()
    store.put_schema(StoredSchema(sid, '"int"', "fp"))
    for v in (1, 2):
        store.put_version(SubjectVersion("gone", v, sid))
    with store.transaction():
        store.remove_version("gone", 1)
        store.remove_version("gone", 2)
        store.remove_version("gone", 3)  # missing: ignored
    assert store.subjects() == []
    assert zk_client.get_children(f"{BASE_PATH}/subjects") == []
    store.put_version(SubjectVersion("gone", 1, sid))  # the subject starts again at 1
    assert store.versions("gone") == [SubjectVersion("gone", 1, sid)]


@pytest.mark.parametrize("subject", ["a/b-value", ".", "..", "ü ñ %2F?#", "zookeeper"])
def test_any_subject_name_is_one_znode(
    open_store: Callable[..., ZooKeeperSchemaStore], subject: str
) -> None:
    store = open_store()
    sid = store.allocate_id()
    store.put_schema(StoredSchema(sid, '"int"', "fp"))
    store.put_version(SubjectVersion(subject, 1, sid))
    store.put_config(subject, "NONE")
    assert store.subjects() == [subject]
    assert store.versions(subject) == [SubjectVersion(subject, 1, sid)]
    assert store.get_config(subject) == "NONE"


def test_lock_serializes_writers_across_stores(
    open_store: Callable[..., ZooKeeperSchemaStore],
) -> None:
    first, second = open_store(), open_store(lock_timeout=0.5)
    third = open_store()
    finished = threading.Event()

    def write_from_third() -> None:
        third.put_config(None, "NONE")
        finished.set()

    with first.transaction():
        first.put_config(None, "FULL")
        with pytest.raises(StoreError, match="held the lock"):
            second.put_config(None, "FORWARD")
        waiter = threading.Thread(target=write_from_third)
        waiter.start()
        time.sleep(0.5)
        assert not finished.is_set(), "a second writer got in while the lock was held"
        assert second.get_config(None) is None  # reads do not wait, and see committed state
    waiter.join(timeout=10)
    assert finished.is_set()
    assert first.get_config(None) == "NONE"  # the third wrote after the first committed


def test_session_lost_during_a_transaction_refuses_the_commit(
    open_store: Callable[..., ZooKeeperSchemaStore], zookeeper: ZooKeeperServer
) -> None:
    """If the session (and with it the ephemeral lock node) is lost, another registry may have
    taken the lock: the commit is refused and the store works on with a new session."""
    store = open_store()
    with pytest.raises(StoreError, match="session expired"), store.transaction():
        store.put_config(None, "FULL")
        # Expire the store's session the usual way: a second client joins it, then closes it.
        session_id, password = store._zk.client_id
        thief = KazooClient(hosts=zookeeper.connect_string, client_id=(session_id, password))
        thief.start(timeout=10)
        thief.stop()
        thief.close()
        deadline = time.monotonic() + 15
        while store._sessions_lost == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert store.get_config(None) is None
    store.put_config(None, "NONE")
    assert store.get_config(None) == "NONE"


def test_unreachable_zookeeper_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="cannot open ZooKeeper store"):
        ZooKeeperSchemaStore(f"127.0.0.1:{free_port()}", connect_timeout=0.5)


def test_zookeeper_connect_selects_the_store() -> None:
    standalone = RegistryConfig.from_properties({})
    cluster = RegistryConfig.from_properties(
        {"schema.registry.zookeeper.connect": "127.0.0.1:2181/sluice"}
    )
    assert (standalone.zookeeper_connect, cluster.zookeeper_connect) == (
        None,
        "127.0.0.1:2181/sluice",
    )


# -- two registry processes ------------------------------------------------------------------


class ZkRegistryProcess(RegistryProcess):
    """A registry process in cluster mode on ``zk_connect``."""

    def __init__(self, zk_connect: str, data_dir: Path, log_path: Path) -> None:
        super().__init__(data_dir, log_path)
        self.zk_connect = zk_connect

    def command(self) -> list[str]:
        return [
            *super().command(),
            "--override",
            f"schema.registry.zookeeper.connect={self.zk_connect}",
        ]


@pytest.fixture
def start_cluster(
    zk_connect: str, tmp_path: Path
) -> Iterator[Callable[[int], list[ZkRegistryProcess]]]:
    """``start_cluster(n)``: ``n`` registry processes on the test's chroot (new ports each
    call); every process started is stopped at teardown and must have exited 0."""
    started: list[ZkRegistryProcess] = []

    def start(n: int) -> list[ZkRegistryProcess]:
        batch = []
        for _ in range(n):
            i = len(started)
            p = ZkRegistryProcess(zk_connect, tmp_path / f"unused{i}", tmp_path / f"reg{i}.log")
            started.append(p)
            batch.append(p)
            p.start(wait=False)
        for p in batch:
            p.wait_ready()
        return batch

    yield start
    for p in started:
        if p.proc is not None:
            status = p.stop()
            assert status == 0, f"registry exited with {status}:\n{p.log()}"


SUBJECTS = [f"topic{j}-value" for j in range(4)]


def registrations(process: int, thread: int, count: int) -> list[tuple[str, str]]:
    """(subject, schema) pairs for one client thread: every third schema is shared by all
    threads of all processes, the rest are the thread's own; the order is shuffled."""
    pairs = []
    for i in range(count):
        tag = f"shared-{i}" if i % 3 == 0 else f"p{process}-t{thread}-{i}"
        pairs.append((SUBJECTS[(i + thread) % len(SUBJECTS)], variant(tag)))
    random.Random(process * 100 + thread).shuffle(pairs)
    return pairs


def test_two_processes_register_concurrently(
    start_cluster: Callable[[int], list[ZkRegistryProcess]],
) -> None:
    processes = start_cluster(2)
    threads_per_process, per_thread = 4, 12
    barrier = threading.Barrier(len(processes) * threads_per_process)

    def run(process: int, thread: int) -> list[tuple[str, str, int]]:
        work = registrations(process, thread, per_thread)
        with RegistryClient(processes[process].url, timeout=60) as c:
            barrier.wait()
            return [(subject, schema, c.register(subject, schema)) for subject, schema in work]

    jobs = [(p, t) for p in range(len(processes)) for t in range(threads_per_process)]
    with ThreadPoolExecutor(len(jobs)) as pool:
        results = [r for batch in pool.map(lambda job: run(*job), jobs) for r in batch]

    ids_of_schema: dict[str, set[int]] = defaultdict(set)
    schemas_of_id: dict[int, set[str]] = defaultdict(set)
    schemas_of_subject: dict[str, set[str]] = defaultdict(set)
    for subject, schema, schema_id in results:
        ids_of_schema[schema].add(schema_id)
        schemas_of_id[schema_id].add(schema)
        schemas_of_subject[subject].add(schema)
    assert all(len(ids) == 1 for ids in ids_of_schema.values()), "one schema, several ids"
    assert all(len(s) == 1 for s in schemas_of_id.values()), "one id, several schemas"
    id_of = {schema: next(iter(ids)) for schema, ids in ids_of_schema.items()}

    clients = [RegistryClient(p.url) for p in processes]
    for subject, schemas in schemas_of_subject.items():
        answers = []
        for c in clients:
            versions = c.versions(subject)
            assert versions == list(range(1, len(schemas) + 1)), subject
            answers.append({v: c.get_version(subject, v)["id"] for v in versions})
        assert answers[0] == answers[1]
        assert sorted(answers[0].values()) == sorted(id_of[s] for s in schemas)
    for schema_id, (schema,) in schemas_of_id.items():
        texts = {c.get_schema(schema_id) for c in clients}
        assert texts == {json.dumps(json.loads(schema), separators=(",", ":"))}


def test_restart_keeps_ids_and_never_reuses_them(
    start_cluster: Callable[[int], list[ZkRegistryProcess]],
) -> None:
    first = start_cluster(2)
    ids: dict[tuple[str, str], int] = {}
    for i in range(6):
        with RegistryClient(first[i % 2].url) as c:
            subject = f"s{i % 3}-value"
            ids[subject, variant(str(i))] = c.register(subject, variant(str(i)))
    with RegistryClient(first[0].url) as c:
        c.set_compatibility("NONE", "s1-value")
        doomed = c.register("doomed-value", variant("doomed"))
        c.delete_subject("doomed-value")
    with RegistryClient(first[1].url) as c:
        assert c.delete_subject("doomed-value", permanent=True) == [1]
    for p in first:
        assert p.stop() == 0, p.log()

    second = start_cluster(2)
    for p in second:
        with RegistryClient(p.url) as c:
            assert c.subjects() == ["s0-value", "s1-value", "s2-value"]
            for (subject, schema), schema_id in ids.items():
                assert c.lookup(subject, schema)["id"] == schema_id
            assert c.get_compatibility("s1-value") == "NONE"
            assert c.versions("s0-value") == [1, 2]
    old = max(*ids.values(), doomed)

    # Both restarted processes hand out fresh ids at once, the deleted schema's included.
    def register(job: tuple[int, str]) -> int:
        process, tag = job
        with RegistryClient(second[process].url) as c:
            return c.register(f"fresh-{tag}-value", variant(tag))

    jobs = [(0, "doomed"), (1, "new-a"), (0, "new-b"), (1, "new-c")]
    with ThreadPoolExecutor(len(jobs)) as pool:
        fresh = list(pool.map(register, jobs))
    assert len(set(fresh)) == len(fresh)
    assert min(fresh) > old
