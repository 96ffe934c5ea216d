"""One history store, one conversation: recognise a run's history as the store's, or refuse the run.

pydantic-ai merges consecutive requests of a run's `message_history` into one new `ModelRequest` without our
metadata (`_clean_message_history`): two failed turns in a row leave two unanswered requests, and the next run
starts from their merge. That request is the store's content, but it carries no recorded id. Giving it the id
of one of its parts would lose the others on resume (a summary lists the ids it keeps), and recording it anew
would record its prompts twice; so it is split back into the recorded requests it was made of, with their ids.
The model still gets one request: pydantic-ai merges consecutive requests again for each request it sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart

from .._messages import _is_tool_result, get_message_id  # pyright: ignore[reportPrivateUsage]
from ..store import HistoryStore, HistoryStoreError
from ._state import is_reduction

__all__ = ["check_same_conversation", "restore_merged_requests"]

_PARTS: TypeAdapter[ModelRequestPart] = TypeAdapter(ModelRequestPart)
_SLACK = 8
"""Records besides the merged requests' own that may lie between them and their neighbour in the store."""
_TAIL_RECORDS = 32
"""How many of the store's latest records are looked at when no neighbour of a merged request is recorded: its
requests were left unanswered, so they are among the latest records."""


async def restore_merged_requests(
    messages: list[ModelMessage], store: HistoryStore | None, *, start: int = 0
) -> list[ModelMessage]:
    """`messages` with every request pydantic-ai merged from recorded requests split back into those requests
    (their ids, their recorded fields, the merged request's part objects, so a reduction made since is kept).
    Parts the store does not hold (e.g. a tool return pydantic-ai synthesized for a call left unanswered) stay
    in a new request: tool results before the recorded requests, other parts after them. Returns `messages`
    itself when nothing was merged (the usual case: one pass over the history from `start`, no store read).
    `start`: where the messages the recording has not seen begin (`unseen_from`); those before it carry ids."""
    if store is None:
        return messages
    merged = [
        (i, m)
        for i, m in enumerate(messages[start:] if start else messages, start)
        if isinstance(m, ModelRequest) and len(m.parts) > 1 and get_message_id(m) is None
    ]
    if not merged or not len(store):
        return messages
    known = {message_id for m in messages if (message_id := get_message_id(m)) is not None}
    result, changed = list(messages), False
    for i, message in reversed(merged):  # from the end: a split does not move the merged requests before it
        candidates = await _recorded_near(store, messages, i, len(message.parts), known)
        split = _split(message, candidates)
        if split is not None:
            result[i : i + 1] = split
            changed = True
    return result if changed else messages


async def _recorded_near(
    store: HistoryStore, messages: Sequence[ModelMessage], i: int, parts: int, known: set[str]
) -> list[ModelRequest]:
    """The recorded requests the run's history does not hold itself, where the request merged at `i` was
    recorded: right after the message before it, right before the message after it, else (neither recorded:
    the merge opens the history, and the new prompt follows it) among the store's latest records. At most
    `parts` requests make up the merge; a few more records (summaries) may lie in between."""
    span = parts + _SLACK
    pages: list[ModelMessage] = []
    previous = _recorded_id(store, messages, i - 1)
    if previous is not None:
        pages += (await store.read(previous, offset=1, limit=span)).messages
    following = _recorded_id(store, messages, i + 1)
    if following is not None:
        total = (await store.read(end_id=following, limit=1)).total
        pages += (await store.read(end_id=following, offset=max(total - 1 - span, 0), limit=span)).messages
    if previous is None and following is None:
        limit = min(len(store), span + _TAIL_RECORDS)
        pages += (await store.read(offset=len(store) - limit, limit=limit)).messages
    found: dict[str, ModelRequest] = {}
    for m in pages:
        message_id = get_message_id(m)
        if isinstance(m, ModelRequest) and message_id is not None and message_id not in known:
            found.setdefault(message_id, m)
    return list(found.values())


def _recorded_id(store: HistoryStore, messages: Sequence[ModelMessage], i: int) -> str | None:
    if not 0 <= i < len(messages):
        return None
    message_id = get_message_id(messages[i])
    return message_id if message_id is not None and message_id in store else None


def _split(message: ModelRequest, candidates: list[ModelRequest]) -> list[ModelMessage] | None:
    """The recorded requests `message` holds (taken out of `candidates`), with the rest around them; `None` when
    it holds none, or when it cannot be split into a valid history."""
    rest = list(message.parts)
    found: list[ModelMessage] = []
    for recorded in list(candidates):
        parts = _take(recorded.parts, rest)
        if parts is not None:
            found.append(replace(recorded, parts=parts))
            candidates.remove(recorded)
    if not found:
        return None
    results = [p for p in rest if _is_tool_result(p)]
    others = [p for p in rest if not _is_tool_result(p)]
    if results and any(_is_tool_result(p) for p in found[0].parts):
        return None  # the results of one response would be split over two requests
    before = [_remainder(message, results)] if results else []
    after = [_remainder(message, others)] if others else []
    return [*before, *found, *after]


def _take(recorded: Sequence[ModelRequestPart], rest: list[ModelRequestPart]) -> list[ModelRequestPart] | None:
    """The parts of `rest` that are `recorded`'s parts (equal, or reduced since: cleared, cut, evicted), in
    `recorded`'s order, removed from `rest`; `None` (and `rest` untouched) unless every part is there."""
    picked: list[int] = []
    for part in recorded:
        index = next((j for j, p in enumerate(rest) if j not in picked and _same_part(part, p)), None)
        if index is None:
            return None
        picked.append(index)
    parts = [rest[j] for j in picked]
    for j in sorted(picked, reverse=True):
        del rest[j]
    return parts


def _same_part(recorded: ModelRequestPart, part: ModelRequestPart) -> bool:
    """`part` is `recorded` (read back from the store: equal once serialized, e.g. `BinaryContent` comes back as
    `BinaryImage`), or `recorded` reduced since."""
    if part == recorded or is_reduction(recorded, part):
        return True
    return type(part) is type(recorded) and _PARTS.dump_json(part) == _PARTS.dump_json(recorded)


def _remainder(message: ModelRequest, parts: list[ModelRequestPart]) -> ModelRequest:
    return ModelRequest(
        parts=parts,
        instructions=message.instructions,
        timestamp=message.timestamp,
        run_id=message.run_id,
        conversation_id=message.conversation_id,
        metadata=dict(message.metadata) if message.metadata else None,
    )


def check_same_conversation(messages: Sequence[ModelMessage], store: HistoryStore) -> None:
    """Refuse a run that would add a second conversation to a history file: none of its messages is in the file,
    and the file holds records (another chat, or the same one not resumed). Cheap: a resumed history's first
    message is found at once; a new conversation is short."""
    if not len(store):
        return
    for message in messages:
        message_id = get_message_id(message)
        if message_id is not None and message_id in store:
            return
    where = store.path if store.path is not None else "the history store"
    raise HistoryStoreError(
        f"{where} already holds another conversation ({len(store)} records) and this run does not continue it. "
        "To continue it, pass message_history=await middleware.store.load() (the file's working context); "
        "to start a new conversation, use another messages_path (a function of the RunContext gives one file per "
        "session); to add this run to the same file anyway, set ContextManagerMiddleware(shared_file=True)."
    )
