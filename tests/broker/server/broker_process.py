"""``StartBroker``: the type of the ``start_broker`` fixture in ``conftest.py`` (the broker
process itself is ``sluice.testing.broker.BrokerProcess``)."""

from __future__ import annotations

from collections.abc import Callable

from sluice.testing.broker import BrokerProcess

StartBroker = Callable[..., BrokerProcess]
"""The ``start_broker`` fixture: ``start_broker(overrides, **BrokerProcess options)``."""

__all__ = ["StartBroker"]
