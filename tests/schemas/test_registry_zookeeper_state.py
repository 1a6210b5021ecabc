"""References, modes, imported ids, metadata and rule sets in the ZooKeeper store: kept across
a reopen, and an imported id never allocated again (the counter skips it)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sluice.schemas.errors import OperationNotPermittedError, ReferenceExistsError
from sluice.schemas.registry import Registry
from sluice.schemas.schema_request import SchemaRequest
from sluice.schemas.store import Reference
from sluice.schemas.zk_store import ZooKeeperSchemaStore

ADDRESS = json.dumps(
    {"type": "record", "name": "Address", "fields": [{"name": "zip", "type": "int"}]}
)
CUSTOMER = json.dumps(
    {"type": "record", "name": "Customer", "fields": [{"name": "home", "type": "Address"}]}
)


@pytest.fixture
def stores(zk_connect: str) -> Iterator[list[ZooKeeperSchemaStore]]:
    opened: list[ZooKeeperSchemaStore] = []
    yield opened
    for store in opened:
        store.close()


def test_state_survives_reopen(zk_connect: str, stores: list[ZooKeeperSchemaStore]) -> None:
    stores.append(ZooKeeperSchemaStore(zk_connect))
    registry = Registry(stores[0])
    registry.set_mode(None, "IMPORT")
    assert registry.register("address-value", SchemaRequest(ADDRESS, id=3, version=5)) == 3
    registry.set_mode(None, "READWRITE")
    registry.set_mode("address-value", "READONLY")
    refs = [{"name": "Address", "subject": "address-value", "version": 5}]
    customer_id = registry.register(
        "customer-value",
        SchemaRequest(CUSTOMER, references=refs, metadata={"properties": {"k": "v"}}),
    )
    assert customer_id == 1
    # The counter skips the imported id.
    assert registry.register("a-value", '"int"') == 2
    assert registry.register("b-value", '"long"') == 4
    with pytest.raises(OperationNotPermittedError):
        registry.register("address-value", '"string"')

    stores.append(ZooKeeperSchemaStore(zk_connect))
    reopened = Registry(stores[1])
    assert reopened.get_mode(None) == "READWRITE"
    assert reopened.get_mode("address-value") == "READONLY"
    info = reopened.get_version("address-value", 5)
    assert info.id == 3
    customer = reopened.get_version("customer-value", 1)
    assert customer.references == (Reference("Address", "address-value", 5),)
    assert customer.metadata == '{"properties":{"k":"v"}}'
    assert reopened.referenced_by("address-value", 5) == [customer_id]
    reopened.delete_mode("address-value")
    with pytest.raises(ReferenceExistsError):
        reopened.delete_subject("address-value")
    # The imported schema parses with its reference resolved in a fresh process's cache.
    assert reopened.lookup("customer-value", SchemaRequest(CUSTOMER, references=refs)).id == 1
    assert reopened.register("c-value", '"double"') == 5


def test_contexts_have_their_own_ids(zk_connect: str, stores: list[ZooKeeperSchemaStore]) -> None:
    stores.append(ZooKeeperSchemaStore(zk_connect))
    registry = Registry(stores[0])
    assert registry.register("plain-value", '"int"') == 1
    assert registry.register(":.billing:plain-value", '"string"') == 1
    registry.set_mode(":.billing:imported-value", "IMPORT")
    assert registry.register(":.billing:imported-value", SchemaRequest('"long"', id=2)) == 2
    stores.append(ZooKeeperSchemaStore(zk_connect))
    reopened = Registry(stores[1])
    assert reopened.schema_by_id(1).text == '"int"'
    assert reopened.schema_by_id(1, subject=":.billing:x").text == '"string"'
    assert reopened.register(":.billing:more-value", '"double"') == 3
    assert reopened.register("more-value", '"double"') == 2
    assert reopened.contexts() == [".", ".billing"]
