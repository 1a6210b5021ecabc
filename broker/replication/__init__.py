"""Replication (the ISR design): leaders track followers, followers fetch and truncate."""
