"""A synthetic browser-agent session: a scripted `FunctionModel` driving browser tools for 100 turns.

Four phases (login, search, cart, checkout), one agent run each, the history carried from run to run. Each turn is
one model request: the model navigates, takes page snapshots (~6,000 tokens each), reads console logs (~4,000
tokens, with repeats and uncaught errors), searches the web (JSON results), clicks and types; a few clicks hit a
stale element and fail. The last turn of a phase marks it done (through a `complete_phase` tool when the agent
has one) and answers. Nothing is random: the same settings always give the same session.

The model also answers summary requests (with a valid summary) and counts them, so a test can assert that a
strategy never needed one, and it measures every request it receives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from .._tokens import count_tokens_approximately
from ..cache import SentRequest
from ._browser_content import console_log, page_snapshot, search_results
from ._recording import is_summary_request, request_overhead, scripted_summary

__all__ = ["BROWSER_PHASES", "BrowserSession", "BrowserSessionResult", "SeenRequest"]

BROWSER_PHASES = ("login", "search", "cart", "checkout")
_PROMPTS = {
    "login": "Log in to shop.example.com as demo@shop.example (password in the vault entry 'shop-demo').",
    "search": "Find a USB-C charger of at least 65 W under $40 with good reviews.",
    "cart": "Add the charger you picked to the cart, with two units, and check the cart total.",
    "checkout": "Check out with the saved address and the saved card; stop before the final confirmation.",
}
# One cycle of tool calls, repeated through a phase: (tool, args).
_CYCLE: tuple[tuple[str, dict[str, Any]], ...] = (
    ("browser_navigate", {}),
    ("browser_snapshot", {}),
    ("web_search", {}),
    ("browser_click", {}),
    ("browser_console_messages", {}),
    ("browser_snapshot", {}),
    ("browser_type", {}),
)


@dataclass(frozen=True)
class SeenRequest:
    """One request the scripted model received."""

    turn: int | None
    """The session turn (0-based), or `None` for a summary request."""
    messages: int
    tokens: int
    """Estimated tokens of its messages plus its instructions and tool definitions."""


@dataclass
class BrowserSessionResult:
    """What a session produced: the final history, every request the model saw, and the histories of each run."""

    messages: list[ModelMessage]
    seen: list[SeenRequest]
    run_histories: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    sent: list[SentRequest] = field(default_factory=list[SentRequest])
    """Every turn request as the model received it (messages, instructions, tool definitions): price it with a
    prompt cache (`CacheSimulator(...).simulate(result.sent)`)."""

    @property
    def turn_requests(self) -> list[SeenRequest]:
        return [r for r in self.seen if r.turn is not None]

    @property
    def summary_requests(self) -> int:
        """Requests asking the model for a summary (an LLM call a zero-LLM strategy never makes)."""
        return sum(1 for r in self.seen if r.turn is None)

    @property
    def max_request_tokens(self) -> int:
        return max((r.tokens for r in self.turn_requests), default=0)

    @property
    def total_request_tokens(self) -> int:
        return sum(r.tokens for r in self.turn_requests)


@dataclass
class BrowserSession:
    """The scripted browser agent: `await session.run(capabilities)` plays the whole session.

    Example:
        ```python
        result = await BrowserSession(turns=100).run([SlidingWindowProcessor(trigger=('tokens', 30_000), keep=20)])
        assert result.summary_requests == 0
        ```
    """

    turns: int = 100
    phases: Sequence[str] = BROWSER_PHASES
    products: int = 40
    """Product cards per page snapshot (40: about 6,000 tokens)."""
    failing_clicks: int = 3
    """Clicks that fail on a stale element ref (a tool error the model retries), spread over the session."""
    turn: int = field(default=0, init=False)
    seen: list[SeenRequest] = field(default_factory=list[SeenRequest], init=False)
    sent: list[SentRequest] = field(default_factory=list[SentRequest], init=False)

    def __post_init__(self) -> None:
        if not self.phases or len(set(self.phases)) != len(self.phases):
            raise ValueError(f"phases must be distinct names, at least one, got {self.phases!r}")
        if self.turns < 2 * len(self.phases):
            raise ValueError(f"turns must be at least 2 per phase ({2 * len(self.phases)}), got {self.turns}")
        self.phases = tuple(self.phases)
        self._per_phase = self.turns // len(self.phases)
        step = max(self.turns // (self.failing_clicks + 1), 1)
        self._failing = {step * (k + 1) for k in range(self.failing_clicks)}
        self._page = "home"

    # -- the session ---------------------------------------------------------------------------------------------

    def agent(self, capabilities: Sequence[AbstractCapability[Any]] = (), **kwargs: Any) -> Agent[None, str]:
        """The browser agent: the scripted model, the browser tools, and `capabilities`."""
        agent = Agent(
            self.model(),
            instructions="You are a browser agent. Use the browser tools to do what the user asks.",
            capabilities=list(capabilities),
            **kwargs,
        )
        agent.tool_plain(self.browser_navigate)
        agent.tool_plain(self.browser_snapshot)
        agent.tool_plain(self.browser_click)
        agent.tool_plain(self.browser_type)
        agent.tool_plain(self.browser_console_messages)
        agent.tool_plain(self.web_search)
        return agent

    def tools(self) -> list[Callable[..., str]]:
        """The browser tools, for an agent built elsewhere (e.g. `create_deep_agent(model, tools=...)`)."""
        return [
            self.browser_navigate,
            self.browser_snapshot,
            self.browser_click,
            self.browser_type,
            self.browser_console_messages,
            self.web_search,
        ]

    def model(self) -> FunctionModel:
        """The scripted model, for an agent built elsewhere (with `tools()`)."""
        return FunctionModel(self._respond, model_name="scripted-browser")

    async def run(
        self,
        capabilities: Sequence[AbstractCapability[Any]] = (),
        *,
        agent: Agent[Any, Any] | None = None,
        deps: Any = None,
    ) -> BrowserSessionResult:
        """Play every phase as one run, carrying the history. `agent`: one built elsewhere with `model()` and
        `tools()` (then `capabilities` is ignored), run with `deps`."""
        agent = agent or self.agent(capabilities)
        history: list[ModelMessage] = []
        runs: list[list[ModelMessage]] = []
        for phase in self.phases:
            prompt = _PROMPTS.get(phase, f"Complete the {phase} phase.")
            result = await agent.run(f"Phase {phase}: {prompt}", message_history=history, deps=deps)
            history = result.all_messages()
            runs.append(history)
        return BrowserSessionResult(history, list(self.seen), runs, list(self.sent))

    # -- the scripted model ----------------------------------------------------------------------------------------

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tokens = count_tokens_approximately(messages) + request_overhead(info)
        if is_summary_request(messages):
            self.seen.append(SeenRequest(None, len(messages), tokens))
            return ModelResponse(parts=[TextPart(scripted_summary(messages, default="The browser session so far."))])
        turn = self.turn
        self.turn += 1
        self.seen.append(SeenRequest(turn, len(messages), tokens))
        usage = RequestUsage(input_tokens=tokens, output_tokens=40)
        self.sent.append(SentRequest(list(messages), info.instructions or "", info.function_tools, output_tokens=40))
        phase_index, position = divmod(turn, self._per_phase)
        phase = self.phases[min(phase_index, len(self.phases) - 1)]
        tools = {t.name for t in info.function_tools}
        if position == self._per_phase - 1 or turn >= self.turns - 1:
            return ModelResponse(parts=[TextPart(_phase_report(phase, turn))], usage=usage)
        if position == self._per_phase - 2 and "complete_phase" in tools:
            state = {"phase": phase, "url": f"https://shop.example.com/{phase}", "report": _phase_report(phase, turn)}
            args = {"name": phase, "state": state, "objectives": [f"{phase} done"]}
            return self._call("complete_phase", args, turn, usage)
        name, _ = _CYCLE[turn % len(_CYCLE)]
        return self._call(name, self._args(name, phase, turn), turn, usage)

    def _call(self, name: str, args: dict[str, Any], turn: int, usage: RequestUsage) -> ModelResponse:
        text = TextPart(f"Turn {turn}: calling {name}.")
        return ModelResponse(parts=[text, ToolCallPart(name, args, tool_call_id=f"call_{turn:03d}")], usage=usage)

    def _args(self, name: str, phase: str, turn: int) -> dict[str, Any]:
        if name == "browser_navigate":
            return {"url": f"https://shop.example.com/{phase}?step={turn}"}
        if name == "web_search":
            return {"query": f"usb c charger 65w {phase} {turn}"}
        if name == "browser_click":
            return {"ref": f"e{35 + turn}", "element": f"Add item {turn % 40} to cart"}
        if name == "browser_type":
            return {"ref": "e22", "text": f"{phase} query {turn}"}
        return {}

    # -- the tools -------------------------------------------------------------------------------------------------

    def browser_navigate(self, url: str) -> str:
        """Open a URL in the browser."""
        self._page = url.rsplit("/", 1)[-1].split("?", 1)[0] or "home"
        return f"Navigated to {url}. Page title: {self._page.title()} | Example Shop"

    def browser_snapshot(self) -> str:
        """The accessibility snapshot of the current page (elements with their refs)."""
        return page_snapshot(self._page, self.turn, self.products)

    def browser_click(self, ref: str, element: str) -> str:
        """Click the element with this ref."""
        if self.turn - 1 in self._failing:
            raise ModelRetry(f"Element {ref} ({element}) is stale: take a new snapshot and use its refs.")
        return f"Clicked {element} [{ref}]."

    def browser_type(self, ref: str, text: str) -> str:
        """Type text into the element with this ref."""
        return f"Typed {text!r} into [{ref}]."

    def browser_console_messages(self) -> str:
        """The browser console's messages since the page loaded."""
        return console_log(self.turn, error=(self.turn // len(_CYCLE)) % 2 == 0)

    def web_search(self, query: str) -> str:
        """Search the web; returns the results as JSON."""
        return search_results(query, self.turn)


def _phase_report(phase: str, turn: int) -> str:
    return f"Phase {phase} complete at turn {turn}: {phase} state saved, objectives met."
