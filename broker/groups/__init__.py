"""Consumer groups on the broker: committed offsets and (later) the group coordinator."""
