"""One coroutine per Kafka API: ``handle(ctx, request) -> bytes | fetch response | None``.

Each module holds one API family; ``HANDLERS`` maps API keys to them, and ApiVersions
advertises exactly the APIs listed here.

Handlers see the broker only as a :class:`~sluice.broker.server.context.BrokerContext` (they
never import ``sluice.broker.server.broker``, which imports them), and have one path for
standalone and cluster mode: leadership questions go to the replica manager
(``ctx.replicas.leader_or_error``), cluster questions to the cluster view (``ctx.cluster``),
which standalone is a cluster of one led entirely by this broker. Error codes are members of
``sluice.broker.protocol.errors.Errors``; a caught exception becomes a code through
``sluice.broker.server.error_mapping``.
"""

from __future__ import annotations

from sluice.broker.protocol import ApiKey
from sluice.broker.server.authorization import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from sluice.broker.server.context import Handler
from sluice.broker.server.handlers import (
    acls,
    cluster_admin,
    configs,
    consumer_groups,
    delete_records,
    epochs,
    fetch,
    find_coordinator,
    group_admin,
    groups,
    list_offsets,
    metadata,
    offsets,
    partition_admin,
    produce,
    security,
    share_admin,
    share_fetch,
    share_groups,
    topics,
    transactions,
)

HANDLERS: dict[int, Handler] = {
    ApiKey.API_VERSIONS: metadata.handle_api_versions,
    ApiKey.METADATA: metadata.handle_metadata,
    ApiKey.PRODUCE: produce.handle_produce,
    ApiKey.INIT_PRODUCER_ID: transactions.handle_init_producer_id,
    ApiKey.FETCH: fetch.handle_fetch,
    ApiKey.LIST_OFFSETS: list_offsets.handle_list_offsets,
    ApiKey.CREATE_TOPICS: topics.handle_create_topics,
    ApiKey.DELETE_TOPICS: topics.handle_delete_topics,
    ApiKey.FIND_COORDINATOR: find_coordinator.handle_find_coordinator,
    ApiKey.OFFSET_COMMIT: offsets.handle_offset_commit,
    ApiKey.OFFSET_FETCH: offsets.handle_offset_fetch,
    ApiKey.JOIN_GROUP: groups.handle_join_group,
    ApiKey.SYNC_GROUP: groups.handle_sync_group,
    ApiKey.HEARTBEAT: groups.handle_heartbeat,
    ApiKey.LEAVE_GROUP: groups.handle_leave_group,
    ApiKey.LIST_GROUPS: groups.handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_groups.handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_groups.handle_consumer_group_describe,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: epochs.handle_offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    ApiKey.ALTER_CONFIGS: configs.handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions,
    ApiKey.DELETE_RECORDS: delete_records.handle_delete_records,
    ApiKey.DELETE_GROUPS: group_admin.handle_delete_groups,
    ApiKey.OFFSET_DELETE: group_admin.handle_offset_delete,
    ApiKey.DESCRIBE_CLUSTER: cluster_admin.handle_describe_cluster,
    ApiKey.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
    ApiKey.END_TXN: transactions.handle_end_txn,
    ApiKey.WRITE_TXN_MARKERS: transactions.handle_write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: transactions.handle_txn_offset_commit,
    ApiKey.DESCRIBE_LOG_DIRS: cluster_admin.handle_describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: cluster_admin.handle_alter_replica_log_dirs,
    ApiKey.ELECT_LEADERS: partition_admin.handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: partition_admin.handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: partition_admin.handle_list_partition_reassignments,
    # SaslHandshake and SaslAuthenticate are the connection's (connection.py), not a handler's.
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: security.handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: security.handle_alter_user_scram_credentials,
    # Share groups (KIP-932).
    ApiKey.SHARE_GROUP_HEARTBEAT: share_groups.handle_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share_groups.handle_share_group_describe,
    ApiKey.SHARE_FETCH: share_fetch.handle_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share_fetch.handle_share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share_admin.handle_describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: share_admin.handle_alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: share_admin.handle_delete_share_group_offsets,
    # Until ApiKey lists them: the keys from Kafka's message definitions.
    DESCRIBE_ACLS: acls.handle_describe_acls,
    CREATE_ACLS: acls.handle_create_acls,
    DELETE_ACLS: acls.handle_delete_acls,
}
