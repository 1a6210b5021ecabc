"""One coroutine per Kafka API: ``handle(broker, request) -> bytes | fetch response | None``.

Each module holds one API family; ``HANDLERS`` maps API keys to them, and ApiVersions
advertises exactly the APIs listed here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.broker.protocol import ApiKey
from sluice.broker.server.handlers import (
    epochs,
    fetch,
    groups,
    list_offsets,
    metadata,
    offsets,
    produce,
    topics,
)

if TYPE_CHECKING:
    from sluice.broker.server.broker import Handler

HANDLERS: dict[int, Handler] = {
    ApiKey.API_VERSIONS: metadata.handle_api_versions,
    ApiKey.METADATA: metadata.handle_metadata,
    ApiKey.PRODUCE: produce.handle_produce,
    ApiKey.INIT_PRODUCER_ID: produce.handle_init_producer_id,
    ApiKey.FETCH: fetch.handle_fetch,
    ApiKey.LIST_OFFSETS: list_offsets.handle_list_offsets,
    ApiKey.CREATE_TOPICS: topics.handle_create_topics,
    ApiKey.DELETE_TOPICS: topics.handle_delete_topics,
    ApiKey.FIND_COORDINATOR: offsets.handle_find_coordinator,
    ApiKey.OFFSET_COMMIT: offsets.handle_offset_commit,
    ApiKey.OFFSET_FETCH: offsets.handle_offset_fetch,
    ApiKey.JOIN_GROUP: groups.handle_join_group,
    ApiKey.SYNC_GROUP: groups.handle_sync_group,
    ApiKey.HEARTBEAT: groups.handle_heartbeat,
    ApiKey.LEAVE_GROUP: groups.handle_leave_group,
    ApiKey.LIST_GROUPS: groups.handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: epochs.handle_offset_for_leader_epoch,
}
