"""``python -m bench.uvloop_broker ARGS`` is ``python -m sluice ARGS`` with uvloop's event loop.

It installs uvloop's event-loop policy, then calls the ``sluice`` command line unchanged: the
broker's ``asyncio.run`` then runs on a uvloop loop. Nothing in the broker is changed or
special-cased; this exists to measure the event loop alone (``bench.peers.kafka``'s
``SluiceServer(loop="uvloop")``, the system ``sluice-uvloop``). uvloop is installed into the
running environment on first use (``python -m pip install uvloop``) by the harness, not here.
"""

from __future__ import annotations

import asyncio
import sys

import uvloop

from sluice.cli import main

if __name__ == "__main__":
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    sys.exit(main())
