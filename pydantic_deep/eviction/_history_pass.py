"""`EvictionProcessor`'s pass over a history (its history-processor form, and before every request as a capability):
only what changed since the previous request is visited; large outputs already in the history are evicted, the
step about to be sent is fitted to `step_token_limit`, and agent-mode outputs are archived when their turns are up
or the agent asked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from summarization_pydantic_ai._tokens import estimate_text_tokens

from ..backends import BackendProtocol
from ._agent_mode import pending_return, turns_after, unmarked
from ._content import as_text
from ._policy import EVICTION_METADATA_KEY, EvictionFailed, EvictionPolicy, OutputArchived, OutputEvicted
from ._previews import mark_removed, watch_new_previews, with_replacements
from ._previews import metadata_of as _metadata
from ._run_state import RunState
from ._step import largest_over_step
from ._store import EvictionArchive

__all__ = ["HistoryPassMixin"]


class HistoryPassMixin:
    """The history pass of `EvictionProcessor` (the fields and methods it uses are the processor's)."""

    step_token_limit: int | None
    _archive_requests: set[str]

    if TYPE_CHECKING:

        def policy_for(self, tool_name: str) -> EvictionPolicy: ...
        def _limit(self, policy: EvictionPolicy) -> int: ...
        def backend_for(self, ctx: RunContext[Any] | None) -> BackendProtocol | None: ...
        def archive(self, backend: BackendProtocol) -> EvictionArchive: ...
        async def _emit(self, event: OutputEvicted | OutputArchived | EvictionFailed) -> None: ...
        async def evict_text(
            self,
            backend: BackendProtocol,
            text: str,
            *,
            tool_name: str,
            tool_call_id: str,
            policy: EvictionPolicy,
            referenced: Sequence[ModelMessage] = (),
        ) -> tuple[str, dict[str, Any]] | None: ...

    async def _process(
        self, messages: list[ModelMessage], state: RunState, ctx: RunContext[Any] | None
    ) -> list[ModelMessage]:
        backend = self.backend_for(ctx)
        change = state.cursor.peek(messages)
        if not change.is_append_only:  # a compaction, an edit or another history: re-find what moved
            first = min((change.start, *change.edited))
            state.pending = {k: i for k, i in state.pending.items() if i < first}
            state.previews = {
                path: kept for path, at in state.previews.items() if (kept := [(i, j) for i, j in at if i < first])
            }
        to_visit = [*change.edited, *range(change.start, len(messages))]
        replacements: dict[tuple[int, int], ToolReturnPart] = {}
        for i in to_visit:
            message = messages[i]
            if not isinstance(message, ModelRequest):
                continue
            for j, part in enumerate(message.parts):
                if isinstance(part, ToolReturnPart) and (found := self._candidate(i, j, part, state, backend)):
                    await self._visit(i, j, part, *found, replacements, messages)
        if self.step_token_limit is not None and backend is not None and messages:
            await self._fit_step(messages, backend, replacements)
        for call_id, i in list(state.pending.items()):
            await self._maybe_archive(messages, call_id, i, state, backend, replacements)
        if backend is not None:
            mark_removed(messages, state, self.archive(backend).removed, replacements)
        if not replacements:
            state.cursor.commit(messages, change)
            return messages
        watch_new_previews(state, replacements)
        result = with_replacements(messages, replacements)
        state.cursor.advance(result)
        return result

    def _candidate(
        self, i: int, j: int, part: ToolReturnPart, state: RunState, backend: BackendProtocol | None
    ) -> tuple[str, EvictionPolicy, BackendProtocol] | None:
        """The text and policy of an output to evict now; notes agent-mode outputs still pending. Sync and cheap:
        a scan calls it for every tool output, most of which need nothing."""
        metadata: Any = part.metadata
        info: Any = cast(dict[str, Any], metadata).get(EVICTION_METADATA_KEY) if isinstance(metadata, dict) else None
        if isinstance(info, dict):
            found = cast(dict[str, Any], info)
            if found.get("state") == "pending":
                state.pending[part.tool_call_id] = i
            elif found.get("state") == "archived" and isinstance(path := found.get("path"), str):
                state.previews.setdefault(path, []).append((i, j))
            return None
        if backend is None:
            return None
        text = as_text(part.content)
        policy = self.policy_for(part.tool_name)
        if text is None or estimate_text_tokens(text) <= self._limit(policy):
            return None
        return text, policy, backend

    async def _visit(
        self,
        i: int,
        j: int,
        part: ToolReturnPart,
        text: str,
        policy: EvictionPolicy,
        backend: BackendProtocol,
        replacements: dict[tuple[int, int], ToolReturnPart],
        messages: Sequence[ModelMessage],
    ) -> None:
        if policy.mode == "agent":
            policy = replace(policy, mode="evict")  # a loaded history had its turn: archive now
        evicted = await self.evict_text(
            backend,
            text,
            tool_name=part.tool_name,
            tool_call_id=part.tool_call_id,
            policy=policy,
            referenced=messages,
        )
        if evicted is None:  # kept whole, and marked so later requests don't try again
            failed = {**_metadata(part.metadata), EVICTION_METADATA_KEY: {"state": "failed"}}
            replacements[(i, j)] = replace(part, metadata=failed)
        else:
            metadata = {**_metadata(part.metadata), EVICTION_METADATA_KEY: evicted[1]}
            replacements[(i, j)] = replace(part, content=evicted[0], metadata=metadata)

    async def _fit_step(
        self,
        messages: list[ModelMessage],
        backend: BackendProtocol,
        replacements: dict[tuple[int, int], ToolReturnPart],
    ) -> None:
        """The step about to be sent (the last request; no request has cached it yet): its largest outputs are
        evicted until together they fit `step_token_limit`."""
        i = len(messages) - 1
        request = messages[i]
        assert self.step_token_limit is not None
        while isinstance(request, ModelRequest) and (
            found := largest_over_step(request, i, replacements, self.step_token_limit)
        ):
            j, part, text = found
            policy = replace(self.policy_for(part.tool_name), mode="evict")
            await self._visit(i, j, part, text, policy, backend, replacements, messages)  # marks it either way

    async def _maybe_archive(
        self,
        messages: list[ModelMessage],
        call_id: str,
        i: int,
        state: RunState,
        backend: BackendProtocol | None,
        replacements: dict[tuple[int, int], ToolReturnPart],
    ) -> None:
        request = messages[i] if i < len(messages) else None
        if not isinstance(request, ModelRequest) or backend is None:
            return
        found = pending_return(request, call_id)
        if found is None:
            state.pending.pop(call_id, None)
            return
        j, part = found
        policy = self.policy_for(part.tool_name)
        turns = turns_after(messages, i, policy.archive_after_turns)
        asked = call_id in self._archive_requests
        if not asked and turns < policy.archive_after_turns:
            return
        text = unmarked(part.content)
        evicted = await self.evict_text(
            backend, text, tool_name=part.tool_name, tool_call_id=call_id, policy=policy, referenced=messages
        )
        if evicted is None:
            return
        metadata = {**_metadata(part.metadata), EVICTION_METADATA_KEY: {**evicted[1], "mode": "agent"}}
        replacements[(i, j)] = replace(part, content=evicted[0], metadata=metadata)
        state.pending.pop(call_id, None)
        self._archive_requests.discard(call_id)
        await self._emit(OutputArchived(call_id, str(evicted[1]["path"]), asked))
