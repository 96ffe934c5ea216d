"""`PhaseCheckpoints` end to end: a three-phase shopping session through Agent.run with FunctionModel.

Phases `login` and `cart` are closed by the model (the `complete_phase` tool), `checkout` by the application
(`mark_done` between runs). After each phase the model's request holds the original instructions, one checkpoint
message and the current phase only; every archived message stays readable in the history store; every history
the model sees (and the store's working context) validates.
"""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import (
    CompactionPart,
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
    ContextManagerMiddleware,
    ContextReduced,
    JsonHistoryStore,
    PhaseCheckpointed,
    PhaseCheckpoints,
    get_message_id,
    validate_history,
)

SYSTEM = "You shop on shop.test for the user."
TASK = "Buy a kettle"


def checkpoint_text(message: ModelMessage) -> str | None:
    parts = [p for p in message.parts if isinstance(p, CompactionPart)]
    return parts[0].content if parts else None


def tools_called(messages: list[ModelMessage]) -> list[str]:
    return [p.tool_name for m in messages for p in m.parts if isinstance(p, ToolCallPart)]


def shopper(seen: list[list[ModelMessage]]) -> FunctionModel:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1]
        returned = [p.tool_name for p in last.parts if isinstance(p, ToolReturnPart)]
        prompts = [p.content for p in last.parts if isinstance(p, UserPromptPart)]
        checkpoint = checkpoint_text(last)
        if returned == ["login"]:
            return call("complete_phase", {"name": "login", "objectives": ["log in"], "state": {"user": "alice"}})
        if returned == ["add_to_cart"]:
            state = {"cart": ["kettle-7"], "total": 29}
            return call("complete_phase", {"name": "cart", "objectives": ["add the kettle"], "state": state})
        if returned == ["checkout"]:
            return ModelResponse(parts=[TextPart("ordered: #42")])
        if prompts[-1:] == ["Now check out"]:
            return call("checkout", {})
        if prompts[-1:] == ["What is the order id?"]:
            return ModelResponse(parts=[TextPart("#42")])
        if checkpoint is not None and "Next phase: cart." in checkpoint:
            return call("add_to_cart", {"item": "kettle-7"})
        if checkpoint is not None and "Next phase: checkout." in checkpoint:
            return ModelResponse(parts=[TextPart("the kettle is in the cart")])
        return call("login", {"user": "alice"})

    return FunctionModel(model)


def call(tool: str, args: dict[str, object]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool, args, f"{tool}-call")])


def assert_rebuilt(request: list[ModelMessage], phases: list[str]) -> None:
    """The first message is the original instructions + the checkpoint naming every completed phase."""
    first = request[0]
    assert isinstance(first, ModelRequest)
    assert isinstance(first.parts[0], SystemPromptPart) and first.parts[0].content == SYSTEM
    assert isinstance(first.parts[1], UserPromptPart) and first.parts[1].content == TASK
    text = checkpoint_text(first)
    assert text is not None and f"Completed phases: {', '.join(phases)}." in text
    assert sum(checkpoint_text(m) is not None for m in request) == 1


async def test_three_phase_session(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    events: list[ContextEvent] = []
    store = JsonHistoryStore.open(tmp_path / "messages.json")
    phases = PhaseCheckpoints(history_store=store, phases=["login", "cart", "checkout"], event_callback=events.append)
    middleware = ContextManagerMiddleware(history_store=store, max_tokens=100_000)
    agent = Agent(shopper(seen), system_prompt=SYSTEM, capabilities=[phases, middleware])

    @agent.tool_plain
    def login(user: str) -> str:
        return f"logged in as {user}; session cookie sid=abc123 " + "x" * 400

    @agent.tool_plain
    def add_to_cart(item: str) -> str:
        return f"{item} added; cart page html " + "y" * 400

    @agent.tool_plain
    def checkout() -> str:
        return "order #42 placed"

    first = await agent.run(TASK)

    # Requests: login call; complete_phase(login); after the login checkpoint: add_to_cart; complete_phase(cart);
    # after the cart checkpoint: the final answer.
    assert first.output == "the kettle is in the cart"
    assert tools_called(seen[0]) == [] and tools_called(seen[1]) == ["login"]
    after_login, after_cart = seen[2], seen[4]
    assert len(after_login) == 1 and tools_called(after_login) == []
    assert_rebuilt(after_login, ["login"])
    assert "Next phase: cart." in (checkpoint_text(after_login[0]) or "")
    assert '"user": "alice"' in (checkpoint_text(after_login[0]) or "")
    assert tools_called(seen[3]) == ["add_to_cart"]  # the current phase follows the checkpoint
    assert len(after_cart) == 1
    assert_rebuilt(after_cart, ["login", "cart"])
    assert [p.name for p in phases.completed] == ["login", "cart"]

    second = await agent.run("Now check out", message_history=first.all_messages())
    assert second.output == "ordered: #42"
    assert_rebuilt(seen[5], ["login", "cart"])  # nothing new was marked: the checkpoint stays as it was
    assert tools_called(seen[6]) == ["checkout"]

    phases.mark_done("checkout", state={"order": "#42"}, objectives=["pay", "confirm"])
    third = await agent.run("What is the order id?", message_history=second.all_messages())
    assert third.output == "#42"
    final_request = seen[-1]
    assert len(final_request) == 1
    assert_rebuilt(final_request, ["login", "cart", "checkout"])
    latest = final_request[0].parts[-1]
    assert isinstance(latest, UserPromptPart) and latest.content == "What is the order id?"
    assert "checkout" not in tools_called(final_request)

    for request in seen:
        assert validate_history(request) == []

    # Nothing is lost: each phase's messages are read back verbatim from the store.
    login_page = await phases.read_phase("login")
    assert tools_called(login_page.messages) == ["login", "complete_phase"]
    cart_page = await phases.read_phase("cart")
    assert tools_called(cart_page.messages) == ["add_to_cart", "complete_phase"]
    checkout_page = await phases.read_phase("checkout")
    assert "checkout" in tools_called(checkout_page.messages)
    returns = [p for m in checkout_page.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert any("order #42" in str(p.content) for p in returns)

    everything = await store.load_all()
    assert {"login", "add_to_cart", "checkout", "complete_phase"} <= set(tools_called(everything))
    resumed = await store.load()
    assert validate_history(resumed, for_request=False) == []
    assert get_message_id(resumed[0]) == get_message_id(final_request[0])  # resumes from the latest checkpoint
    assert isinstance(resumed[-1], ModelResponse) and resumed[-1].parts == [TextPart("#42")]

    checkpoints = [e for e in events if isinstance(e, PhaseCheckpointed)]
    assert [e.phases for e in checkpoints] == [("login",), ("cart",), ("checkout",)]
    assert checkpoints[2].objectives == ("pay", "confirm")
    assert all(e.archived_messages > 0 and e.first_archived_id and e.last_archived_id for e in checkpoints)
    reductions = [e for e in events if isinstance(e, ContextReduced)]
    assert [e.strategy for e in reductions] == ["checkpoint"] * 3
    assert all(e.tokens_after < e.tokens_before for e in reductions)
