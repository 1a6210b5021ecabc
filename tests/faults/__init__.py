"""Fault tests: network partitions (network namespaces), session expiry, and the soak's
checker — see ``sluice.testing.netns`` and ``sluice.testing.faults``."""
