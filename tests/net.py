"""Ports and processes for tests that start real servers: they live in ``sluice.testing``
(``sluice.testing.net``, ``sluice.testing.process``); imported here for the test modules that
still name this module."""

from __future__ import annotations

from sluice.testing.net import free_port, wait_for_port
from sluice.testing.process import signal_and_wait

__all__ = ["free_port", "signal_and_wait", "wait_for_port"]
