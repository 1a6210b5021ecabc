"""The broker-process tests' names for a real Sluice broker: :class:`BrokerProcess` lives in
``sluice.testing.broker`` (see there); ``StartBroker`` is the type of the ``start_broker``
fixture in ``conftest.py``."""

from __future__ import annotations

from collections.abc import Callable

from sluice.testing.broker import BrokerProcess

StartBroker = Callable[..., BrokerProcess]
"""The ``start_broker`` fixture: ``start_broker(overrides, **BrokerProcess options)``."""

__all__ = ["BrokerProcess", "StartBroker"]
