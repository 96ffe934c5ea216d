"""`ImportancePruner`: what it keeps and drops, on histories shaped like a browser agent's, and through Agent.run."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    ContextEvent,
    ContextReduced,
    ImportancePruner,
    ImportanceWeights,
    count_tokens_approximately,
    validate_history,
)
from summarization_pydantic_ai.pruning import MERGED_METADATA_KEY

FILLER = "lorem ipsum dolor sit amet " * 40


def exchange(n: int, tool: str, result: str, *, args: dict[str, object] | None = None, outcome: str = "success"):
    call_id = f"c{n}"
    return [
        ModelResponse(parts=[ToolCallPart(tool, args or {"n": n}, call_id)]),
        ModelRequest(parts=[ToolReturnPart(tool, result, call_id, outcome=outcome)]),  # type: ignore[arg-type]
    ]


def session(steps: int = 12) -> list[ModelMessage]:
    """A system prompt and task, then tool steps: reads of filler, one failure, one click, one file mention."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("You drive a browser."), UserPromptPart("Buy a kettle on shop.test")])
    ]
    for n in range(steps):
        if n == 3:
            history += exchange(
                n, "browser_navigate", "Error: timeout loading https://shop.test/cart", outcome="failed"
            )
        elif n == 5:
            history += exchange(n, "browser_click", "clicked [ref=e42] Add to cart")
        elif n == 6:
            history += exchange(n, "read_file", "saved receipt to out/receipt.json " + FILLER)
        else:
            history += exchange(n, "browser_snapshot", f"page {n}: " + FILLER)
    history += exchange(steps, "read_file", "out/receipt.json holds the order id")
    return history


def tool_names(messages: list[ModelMessage]) -> list[str]:
    return [p.tool_name for m in messages for p in m.parts if isinstance(p, ToolCallPart)]


async def test_drops_low_value_reads_first_and_keeps_errors_state_changes_and_references() -> None:
    history = session()
    before = count_tokens_approximately(history)
    events: list[ContextEvent] = []
    pruner = ImportancePruner(target_tokens=before // 2, event_callback=events.append)

    result = await pruner(history)

    assert validate_history(result) == []
    assert count_tokens_approximately(result) <= before // 2
    names = tool_names(result)
    assert "browser_navigate" in names  # the failure
    assert "browser_click" in names  # the state change
    assert names.count("read_file") == 2  # the receipt path is referenced by the last exchange
    assert result[0] is history[0] and result[-2:] == history[-2:]
    assert names.count("browser_snapshot") < 10
    [event] = events
    assert isinstance(event, ContextReduced) and event.strategy == "importance"
    assert event.tokens_before == before and event.tokens_after == count_tokens_approximately(result)
    assert 0 < event.pct_reduced < 100 and event.messages_after == len(result)


async def test_below_the_trigger_the_history_is_returned_as_is() -> None:
    history = session()
    tokens = count_tokens_approximately(history)
    pruner = ImportancePruner(target_tokens=tokens // 2, trigger_tokens=tokens)
    assert await pruner(history) is history
    assert await ImportancePruner(target_tokens=tokens)(history) is history


async def test_trigger_above_target_prunes_down_to_the_target() -> None:
    history = session()
    tokens = count_tokens_approximately(history)
    pruner = ImportancePruner(target_tokens=tokens // 3, trigger_tokens=tokens - 1)
    assert count_tokens_approximately(await pruner(history)) <= tokens // 3


async def test_an_unreachable_target_keeps_every_must_keep_message() -> None:
    history = session()
    result = await ImportancePruner(target_tokens=1)(history)
    assert validate_history(result) == []
    assert result[0] is history[0] and result[-2:] == history[-2:]
    assert len(result) < len(history)


async def test_keep_predicate_and_protect_score_protect_messages() -> None:
    history = session()

    def page_seven(message: ModelMessage) -> bool:
        return any("page 7:" in str(getattr(p, "content", "")) for p in message.parts)

    kept = await ImportancePruner(target_tokens=1, keep_predicate=page_seven)(history)
    assert any(page_seven(m) for m in kept)
    assert validate_history(kept) == []
    protected = await ImportancePruner(target_tokens=1, protect_score=0.0)(history)
    assert protected is history  # every unit scores at least 0


def test_scores_explain_themselves() -> None:
    history = session()
    scores = ImportancePruner(target_tokens=10).score(history)
    by_tool = {tool_names([history[s.indices[0]]])[0]: s for s in scores if len(s.indices) == 2}
    assert "error" in by_tool["browser_navigate"].reasons
    assert "state_change" in by_tool["browser_click"].reasons
    assert scores[0].must_keep and "user_instruction" in scores[0].reasons
    assert scores[-1].must_keep
    receipt = next(s for s in scores if "out/receipt.json" in str(history[s.indices[-1]].parts[0].content))  # type: ignore[union-attr]
    assert "referenced" in receipt.reasons and receipt.references == 1
    plain = next(s for s in scores if "page 1:" in str(history[s.indices[-1]].parts[0].content))  # type: ignore[union-attr]
    assert plain.reasons == () and not plain.must_keep
    assert all(s.tokens > 0 for s in scores)


def test_weights_change_the_ranking() -> None:
    history = session()
    no_recency = ImportancePruner(target_tokens=10, weights=ImportanceWeights(recency=0.0)).score(history)
    plain = [s.score for s in no_recency if not s.reasons]
    assert plain and all(score == 0.0 for score in plain)


async def test_merge_similar_keeps_the_latest_of_identical_polls() -> None:
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("wait for the build")])]
    for n in range(5):
        history += exchange(n, "build_status", f"status: running ({n * 10} s elapsed) " + FILLER)
    history += exchange(9, "build_status", "status: done")
    events: list[ContextEvent] = []
    just_over = count_tokens_approximately(history) - 1  # merging alone meets the target: nothing else is dropped
    pruner = ImportancePruner(target_tokens=just_over, merge_similar=True, event_callback=events.append)

    result = await pruner(history)

    assert validate_history(result) == []
    assert len(result) == 1 + 2 + 2  # the prompt, the latest running poll (merged), the final exchange
    assert result[1].metadata is not None and result[1].metadata[MERGED_METADATA_KEY] == 4
    assert "40 s elapsed" in str(result[2].parts[0].content)  # type: ignore[union-attr]
    assert history[9].metadata is None  # the input is not mutated


async def test_a_custom_counter_is_used() -> None:
    calls: list[int] = []

    def counter(messages: object) -> int:
        calls.append(1)
        return 100 * len(messages)  # type: ignore[arg-type]

    history = session()
    result = await ImportancePruner(target_tokens=1_000, token_counter=counter)(history)
    assert len(result) <= 10 and calls


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="target_tokens"):
        ImportancePruner(target_tokens=0)
    with pytest.raises(ValueError, match="trigger_tokens"):
        ImportancePruner(target_tokens=100, trigger_tokens=50)
    with pytest.raises(TypeError, match="state_change_tools"):
        ImportancePruner(target_tokens=100, state_change_tools="write*")
    with pytest.raises(ValueError, match="recency"):
        ImportanceWeights(recency=-1)
    with pytest.raises(TypeError, match="keep_predicate"):
        ImportancePruner(target_tokens=100, keep_predicate="x")  # type: ignore[arg-type]


@pytest.mark.parametrize("form", ["capability", "process_history"])
async def test_end_to_end_every_request_stays_under_the_target(form: str) -> None:
    """A 30-step tool session through Agent.run: each request the model sees is valid and, once over the target,
    pruned below it; the task prompt and the latest exchange always reach the model."""
    seen: list[list[ModelMessage]] = []
    target = 2_500

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        step = sum(1 for m in messages for p in m.parts if isinstance(p, ToolReturnPart))
        if len(seen) > 30:
            return ModelResponse(parts=[TextPart("done")])
        tool = "browser_click" if len(seen) % 7 == 0 else "browser_snapshot"
        return ModelResponse(parts=[ToolCallPart(tool, {"step": step}, f"call-{len(seen)}")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def browser_snapshot(step: int) -> str:
        return f"snapshot {step}: " + FILLER

    @agent.tool_plain
    def browser_click(step: int) -> str:
        return f"clicked [ref=e{step}]"

    pruner = ImportancePruner(target_tokens=target)
    capability = pruner if form == "capability" else ProcessHistory(pruner)
    result = await agent.run("Buy a kettle", capabilities=[capability])

    assert result.output == "done"
    for request in seen:
        assert validate_history(request) == []
        assert any(isinstance(p, UserPromptPart) and p.content == "Buy a kettle" for p in request[0].parts)
    assert max(count_tokens_approximately(r) for r in seen[10:]) <= target
    assert len(seen[-1]) < 1 + 2 * 30  # unpruned it would hold the prompt and 30 exchanges
    assert "browser_click" in tool_names(seen[-1])  # state changes outlive the snapshots
