"""Shared fixtures and hypothesis strategies for the protocol tests."""

from __future__ import annotations

from hypothesis import strategies as st
from kio.static.primitive import Records

# kio registers hypothesis strategies for its primitive types except ``Records``; record bytes
# are opaque to the codec, so any short byte string will do.
st.register_type_strategy(Records, st.binary(max_size=64))
