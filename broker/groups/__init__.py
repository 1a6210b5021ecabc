"""Consumer groups on the broker: the group coordinator, committed offsets and the records of
``__consumer_offsets`` in Kafka's binary schemas."""
