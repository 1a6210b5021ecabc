"""Share groups (KIP-932): queue semantics on topics — ``SharePartition`` (one partition's
in-flight records), ``ShareGroup`` (membership and assignment), ``ShareStateLog`` (what
survives a restart or a failover: the share-partitions' state in the replicated
``__share_group_state`` topic, as the records of ``share_state_records``) and
``ShareCoordinator`` (the broker's service over them)."""
