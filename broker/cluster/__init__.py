"""Cluster metadata: topics and their partitions, in the log dirs (standalone) or ZooKeeper."""
