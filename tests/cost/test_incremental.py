"""A later run of a session prices only what it has not priced: the session's totals stay exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import ContextManagerMiddleware, JsonHistoryStore, ensure_message_id
from summarization_pydantic_ai.cost import CostTrackingMiddleware, _ledger, session_costs
from summarization_pydantic_ai.cost._seeds import SessionSeeds
from summarization_pydantic_ai.store import open_database
from summarization_pydantic_ai.store._catalog_ledger import CatalogLedger

from ._scripted import AGENT_USAGE, Reader, SummaryModel, make_agent
from .test_middleware import context_manager


@pytest.fixture
def priced(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The model of every request the middleware's ledgers price (with genai-prices: the costly part). The session
    catalogue the store keeps counts each recorded response once more, a price the middleware computed just before
    (`price_usage` keeps the latest ones): not counted here."""
    models: list[str | None] = []
    original = _ledger.CostLedger._add  # pyright: ignore[reportPrivateUsage]

    def counting(
        self: _ledger.CostLedger, kind: Any, usage: RequestUsage, model: str | None, provider: str | None
    ) -> _ledger.Priced:
        if not isinstance(self, CatalogLedger):
            models.append(model)
        return original(self, kind, usage, model, provider)

    monkeypatch.setattr(_ledger.CostLedger, "_add", counting)
    return models


async def test_a_later_run_prices_only_the_new_records_of_the_store(tmp_path: Path, priced: list[str | None]) -> None:
    path = tmp_path / "messages.json"
    reader, summarizer = Reader(), SummaryModel()
    manager = context_manager(path, summarizer)
    cost = CostTrackingMiddleware(context_manager=manager)
    agent = make_agent(reader, [manager, cost])
    history: list[ModelMessage] = []
    for i in range(6):  # compactions happen on the way (the store keeps every record)
        priced.clear()
        calls = reader.calls + summarizer.calls
        history = (await agent.run(f"read file {i}", message_history=history)).all_messages()
        # Each request is priced when it comes (for the run and for the session): at the next run's start, the
        # records of the earlier runs are not priced again.
        assert len(priced) == 2 * (reader.calls + summarizer.calls - calls)
        assert cost.totals == session_costs(await JsonHistoryStore.open(path).load_all())  # exact
    assert summarizer.calls > 0


async def test_without_a_store_a_continued_history_is_priced_once(priced: list[str | None]) -> None:
    reader = Reader()
    cost = CostTrackingMiddleware()
    agent = make_agent(reader, [cost])
    history = (await agent.run("one")).all_messages()
    first = history
    history = (await agent.run("two", message_history=history)).all_messages()
    priced.clear()
    history = (await agent.run("three", message_history=history)).all_messages()
    assert len(priced) == 2 * 2  # this run's 2 responses (for the run and the session), nothing before them
    assert cost.totals == session_costs(history)

    other = (await agent.run("another conversation")).all_messages()  # does not continue: priced whole
    assert cost.totals == session_costs(other)
    again = (await agent.run("back to the first", message_history=first)).all_messages()
    assert cost.totals == session_costs(again)


async def test_two_sessions_through_one_middleware_keep_their_own_totals(tmp_path: Path) -> None:
    """Two sessions through one middleware (one store each, chosen per run): each keeps its own totals."""
    reader = Reader()
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    current = {"path": paths[0]}
    manager = ContextManagerMiddleware(
        messages_path=lambda ctx: current["path"], max_tokens=100_000, summarization_model=None
    )
    cost = CostTrackingMiddleware(context_manager=manager)
    agent = make_agent(reader, [manager, cost])
    histories: dict[Path, list[ModelMessage]] = {p: [] for p in paths}
    for path in [*paths, *paths, paths[0]]:
        current["path"] = path
        histories[path] = (await agent.run("go", message_history=histories[path])).all_messages()
        assert cost.totals == session_costs(await JsonHistoryStore.open(path).load_all())


def _responses(prefix: str, count: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for i in range(count):
        messages.append(ModelRequest(parts=[UserPromptPart(f"{prefix} {i}")]))
        messages.append(ModelResponse(parts=[TextPart("ok")], usage=AGENT_USAGE, model_name="gpt-4o"))
    for message in messages:
        ensure_message_id(message)
    return messages


async def test_a_store_rewritten_since_it_was_priced_is_priced_again(tmp_path: Path) -> None:
    database = open_database(f"sqlite:///{tmp_path / 'h.db'}")
    store = database.session("s")
    seeds = SessionSeeds()
    await store.append(_responses("first", 3))
    assert (await seeds.from_store(store))[0].totals().agent.requests == 3
    await store.append(_responses("more", 2))
    assert (await seeds.from_store(store))[0].totals().agent.requests == 5  # the 2 new ones added to the 3

    await database.delete_session("s")  # the same store, other records: a rewind, a restore
    replaced = _responses("other", 6)  # more records than were priced: told apart by the id at the last place
    await store.load()  # as a writer does after another one changed the session
    await store.append(replaced)
    assert (await seeds.from_store(store))[0].totals() == session_costs(replaced)
    await store.append(_responses("other, later", 3))
    assert (await seeds.from_store(store))[0].totals() == session_costs(await store.load_all())
    await database.close()


async def test_a_failed_run_leaves_the_totals_exact(tmp_path: Path) -> None:
    """A run that fails has no end: the next run prices what it recorded, once."""
    path = tmp_path / "messages.json"
    reader = Reader()
    manager = context_manager(path)
    cost = CostTrackingMiddleware(context_manager=manager)
    agent = make_agent(reader, [manager, cost])
    history = (await agent.run("read file 0")).all_messages()
    failing = Reader()

    def fails_on_the_answer(messages: list[ModelMessage], info: Any) -> ModelResponse:
        if failing.calls >= 1:
            raise ModelHTTPError(500, "gpt-4o", "server error")
        return failing(messages, info)

    broken = Agent(FunctionModel(fails_on_the_answer, model_name="gpt-4o"), capabilities=[manager, cost])
    broken.tool_plain(name="read")(lambda path: "text")
    with pytest.raises(ModelHTTPError):
        await broken.run("read file 1", message_history=history)
    store = JsonHistoryStore.open(path)
    await agent.run("read file 2", message_history=await store.load())
    assert cost.totals == session_costs(await store.load_all())
    assert cost.totals is not None and cost.totals.agent.requests == reader.calls + failing.calls


async def test_a_run_rewound_away_is_not_counted(tmp_path: Path) -> None:
    """The store is cut back to the start of the second run (its prompt kept, its requests gone): the totals
    count what the store holds, not the second run's requests the middleware priced as they came."""
    database = open_database(f"sqlite:///{tmp_path / 'h.db'}")
    store = database.session("s")
    manager = ContextManagerMiddleware(history_store=store, max_tokens=100_000, summarization_model=None)
    cost = CostTrackingMiddleware(context_manager=manager)
    agent = make_agent(Reader(), [manager, cost])
    first = (await agent.run("one")).all_messages()
    second = (await agent.run("two", message_history=first)).all_messages()
    kept = second[: len(first) + 1]  # up to the second run's prompt

    await database.delete_session("s")
    await store.load()
    await store.append(kept)
    await agent.run("three", message_history=kept)
    assert cost.totals == session_costs(await store.load_all())
    await database.close()
