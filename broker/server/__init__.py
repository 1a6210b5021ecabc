"""The broker process: an asyncio listener, per-API handlers, delayed fetches, metrics."""
