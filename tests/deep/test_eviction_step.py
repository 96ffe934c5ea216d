"""`EvictionProcessor`'s step limit (one step's outputs together) and the page its previews suggest."""

from __future__ import annotations

import re

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from pydantic_deep.backends import StateBackend
from pydantic_deep.eviction import EVICTION_METADATA_KEY, EvictionProcessor
from pydantic_deep.filesystem import number_lines
from summarization_pydantic_ai import validate_history
from summarization_pydantic_ai._tokens import estimate_text_tokens


def output(tokens: int, tag: str) -> str:
    return "\n".join(f"{tag} line {i:05d} " + "x" * 30 for i in range(tokens // 12))


def step(*sizes: int, start: int = 0) -> list[ModelMessage]:
    ids = [f"c{start + i}" for i in range(len(sizes))]
    return [
        ModelResponse(parts=[ToolCallPart("fetch", {"n": i}, call_id) for i, call_id in enumerate(ids)]),
        ModelRequest(parts=[ToolReturnPart("fetch", output(n, c), c) for n, c in zip(sizes, ids, strict=True)]),
    ]


def evicted(message: ModelMessage) -> list[bool]:
    return [EVICTION_METADATA_KEY in (getattr(p, "metadata", None) or {}) for p in message.parts]


async def test_the_largest_outputs_of_the_step_go_until_the_rest_fit() -> None:
    processor = EvictionProcessor(token_limit=3_000, step_token_limit=5_000, backend=StateBackend())
    history = [ModelRequest(parts=[UserPromptPart("go")]), *step(2_000, 2_000), *step(2_000, 2_800, 1_500, start=2)]
    out = await processor(history)
    assert validate_history(out) == []
    assert out[:3] == history[:3]  # an earlier step, already sent (4,000 tokens: within the limit anyway)
    assert evicted(out[4]) == [False, True, False]  # the 2,800 went; 2,000 + 1,500 + the preview fit
    kept = sum(estimate_text_tokens(str(p.content)) for p in out[4].parts)
    assert kept <= 5_000
    assert await processor(out) is out  # nothing more to do


async def test_a_step_within_its_limit_is_left_alone_and_the_limit_is_checked() -> None:
    processor = EvictionProcessor(token_limit=3_000, step_token_limit=5_000, backend=StateBackend())
    history = [ModelRequest(parts=[UserPromptPart("go")]), *step(2_000, 2_000)]
    assert await processor(history) is history
    with pytest.raises(ValueError, match="step_token_limit"):
        EvictionProcessor(step_token_limit=0)


async def test_the_suggested_page_is_never_evicted_again() -> None:
    """Lines of ~90 characters: 200 of them would be ~4,500 tokens, above a 3,200-token limit; the preview
    suggests a page that takes at most half of it, so reading it back is not evicted again."""
    backend = StateBackend()
    processor = EvictionProcessor(token_limit=3_200, backend=backend)
    log = "\n".join(
        f"tests/test_{i:05d}.py::test_rounding_of_amount_{i} PASSED" + " " * 20 + "[ 50%]" for i in range(800)
    )
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("go")]),
        ModelResponse(parts=[ToolCallPart("run_tests", {}, "t1")]),
        ModelRequest(parts=[ToolReturnPart("run_tests", log, "t1")]),
    ]
    out = await processor(history)
    note = str(out[2].parts[0].content)  # type: ignore[union-attr]
    found = re.search(r'read_file\(path="([^"]+)", offset=0, limit=(\d+)\)', note)
    assert found is not None
    path, limit = found.group(1), int(found.group(2))
    assert limit < 200
    page = number_lines(await backend.read(path), path, offset=0, limit=limit)
    assert estimate_text_tokens(page) <= 3_200
