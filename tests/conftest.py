"""Shared test setup: no test ever reaches a real model (`async def` tests run through pytest-asyncio, auto mode).

The PostgreSQL fixtures (`postgres_server`, `postgres_dsn`) come from `postgres_server.py`."""

from __future__ import annotations

import pydantic_ai.models
from postgres_server import postgres_dsn, postgres_server

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

__all__ = ["postgres_dsn", "postgres_server"]
