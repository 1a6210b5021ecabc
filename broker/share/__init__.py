"""Share groups (KIP-932): queue semantics on topics — ``SharePartition`` (one partition's
in-flight records), ``ShareGroup`` (membership and assignment), ``ShareStateStore`` (what
survives a restart) and ``ShareCoordinator`` (the broker's service over them)."""
