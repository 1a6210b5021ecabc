"""Sluice's server side: log storage, the Kafka protocol, the broker, cluster metadata."""
