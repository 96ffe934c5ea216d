"""What the terminal shows: streamed text, tool calls, a progress indicator, context events and the usage bar."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from rich.console import Console
from rich.status import Status
from rich.text import Text

from summarization_pydantic_ai import (
    CompactionCompleted,
    CompactionFailed,
    CompactionStarted,
    ContextUsage,
    SummarizerFallback,
    ToolOutputTruncated,
    UsageUpdated,
)
from summarization_pydantic_ai._tokens import estimate_text_tokens

from ..eviction import EvictionFailed, OutputEvicted

__all__ = ["Ui", "format_bytes", "usage_bar"]

_BAR_WIDTH = 30
_ARGS_WIDTH = 80
_MEMORY_TOOLS = ("write_memory", "update_memory")


def usage_bar(tokens: int, max_tokens: int, threshold: float, width: int = _BAR_WIDTH) -> Text:
    """`[██████░░░░|░░░] 42%`: the used fraction, with `|` where compaction triggers."""
    pct = tokens / max_tokens if max_tokens else 0.0
    filled = min(width, round(pct * width))
    mark = min(width - 1, int(threshold * width))
    style = "green" if pct < threshold * 0.75 else "yellow" if pct < threshold else "red"
    bar = Text("[")
    for i in range(width):
        if i == mark:
            bar.append("|", style="bold")
        else:
            bar.append("█" if i < filled else "░", style=style if i < filled else "dim")
    bar.append(f"] {pct:.0%}")
    return bar


def format_bytes(size: int | None) -> str:
    if size is None:
        return "-"
    if size < 1024:
        return f"{size:,} B"
    if size < 1024**2:
        return f"{size / 1024:,.1f} KB"
    return f"{size / 1024**2:,.1f} MB"


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _short(value: Any, width: int = _ARGS_WIDTH) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


class Ui:
    """The terminal side of a run: prints as events arrive and shows a spinner while something long runs."""

    def __init__(self, console: Console, *, show_usage: bool = False, threshold: float = 0.9) -> None:
        self.console = console
        self.show_usage = show_usage
        self.threshold = threshold
        self._status: Status | None = None
        self._streaming = False
        self.last_usage: UsageUpdated | None = None
        self.compactions: list[CompactionCompleted] = []
        self.fallbacks: list[SummarizerFallback] = []
        self.failures: list[CompactionFailed] = []
        self.evictions: list[OutputEvicted] = []

    # -- the progress indicator --------------------------------------------------------------------------------------

    def busy(self, text: str) -> None:
        self.end_line()
        if self._status is None:
            self._status = self.console.status(text, spinner="dots")
            self._status.start()
        else:
            self._status.update(text)

    def idle(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def end_line(self) -> None:
        """Finish a line of streamed text before printing anything else."""
        if self._streaming:
            self.console.print()
            self._streaming = False

    def line(self, text: str | Text, style: str | None = None) -> None:
        self.idle()
        self.end_line()
        self.console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)

    # -- the agent's stream ------------------------------------------------------------------------------------------

    def stream_event(self, event: Any) -> None:
        if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
            self._text(event.part.content)
        elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
            self._text(event.delta.content_delta)
        elif isinstance(event, FunctionToolCallEvent):
            self.line(f"  → {event.part.tool_name}({_short(event.part.args_as_json_str())})", style="cyan")
            self.busy(f"running {event.part.tool_name}…")
        elif isinstance(event, FunctionToolResultEvent):
            self._tool_result(event)

    def _text(self, text: str) -> None:
        if not text:
            return
        self.idle()
        self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        self._streaming = True

    def _tool_result(self, event: FunctionToolResultEvent) -> None:
        part = event.part
        content = part.model_response_str()
        if part.outcome != "success":
            self.line(f"  ← {part.tool_name} failed ({part.outcome}): {_short(content)}", style="red")
            return
        lines = content.count("\n") + 1
        if part.tool_name in _MEMORY_TOOLS:
            self.line(f"  ✎ memory: {_short(content)}", style="magenta")
            return
        tokens = estimate_text_tokens(content)
        self.line(f"  ← {part.tool_name}: {_plural(lines, 'line')}, ~{tokens:,} tokens", style="dim")

    # -- context events (ContextManagerMiddleware and EvictionProcessor `event_callback`) ---------------------------

    def context_event(self, event: Any) -> None:
        if isinstance(event, CompactionStarted):
            what = f" (focus: {event.focus})" if event.focus else ""
            self.busy(f"compacting {event.messages_before} messages, ~{event.tokens_before:,} tokens{what}…")
        elif isinstance(event, CompactionCompleted):
            self.compactions.append(event)
            how = "deterministic summary" if event.summarizer == "deterministic" else f"summary by {event.summarizer}"
            # tokens_before measured the whole request; the next usage line measures the compacted one
            self.line(
                f"  ⟳ compacted: {event.messages_before} → {event.messages_after} messages "
                f"({event.summarized_messages} summarized, {how}; ~{event.tokens_before:,} tokens before)",
                style="yellow",
            )
        elif isinstance(event, SummarizerFallback):
            self.fallbacks.append(event)
            self.line(f"  ! the summary model failed ({_short(event.error)}): a deterministic summary was used", "red")
        elif isinstance(event, CompactionFailed):
            self.failures.append(event)
            self.line(f"  ! compaction failed, the history is unchanged: {_short(event.error)}", style="red")
        elif isinstance(event, OutputEvicted):
            self.evictions.append(event)
            self.line(
                f"  ⤓ evicted the {event.tool_name} output (~{event.tokens:,} tokens) to {event.path}; "
                f"the model sees a {event.preview_kind} preview",
                style="blue",
            )
        elif isinstance(event, EvictionFailed):
            self.line(f"  ! eviction failed, the output stays in the context: {_short(event.error)}", style="red")
        elif isinstance(event, ToolOutputTruncated):
            self.line(f"  ✂ {event.tool_name} output cut: ~{event.tokens_before:,} → ~{event.tokens_after:,} tokens")
        elif isinstance(event, UsageUpdated):
            self.last_usage = event
            if self.show_usage:
                bar = usage_bar(event.tokens, event.max_tokens, self.threshold)
                self.line(
                    Text("  context ")
                    .append(bar)
                    .append(f"  ~{event.tokens:,} tokens, {_plural(event.messages, 'message')}")
                )

    def context_summary(self, usage: ContextUsage) -> Text:
        """One line after a turn: the usage bar, tokens and where compaction starts."""
        bar = usage_bar(usage.tokens, usage.max_tokens, usage.threshold)
        return (
            Text("  context ", style="dim")
            .append(bar)
            .append(f"  ~{usage.tokens:,} / {usage.max_tokens:,} tokens", style="dim")
            .append(f" (compacts at {usage.threshold:.0%})", style="dim")
        )
