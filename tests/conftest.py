"""Shared test setup: no test ever reaches a real model (`async def` tests run through pytest-asyncio, auto mode)."""

from __future__ import annotations

import pydantic_ai.models

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
