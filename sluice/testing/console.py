"""What the demos print as they go: one headline per step. Thread-safe (each line is one
flushed ``print``)."""

from __future__ import annotations


def step(message: str) -> None:
    """A blank line, then ``==> message``, flushed at once (subprocess output interleaves)."""
    print(f"\n==> {message}", flush=True)
