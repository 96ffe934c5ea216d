"""HistoryCursor: exactly one of unchanged / appended / edited / replaced, for any edit anywhere."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from summarization_pydantic_ai import CursorTable, HistoryCursor, ensure_message_id
from summarization_pydantic_ai import _cursor as cursor_module


def _history(n: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for i in range(n):
        message: ModelMessage = (
            ModelRequest(parts=[UserPromptPart(f"prompt {i}")])
            if i % 2 == 0
            else ModelResponse(parts=[TextPart(f"answer {i}")])
        )
        ensure_message_id(message)
        messages.append(message)
    return messages


def _edit(message: ModelMessage, text: str) -> ModelMessage:
    if isinstance(message, ModelRequest):
        return dataclasses.replace(message, parts=[UserPromptPart(text)])
    return dataclasses.replace(message, parts=[TextPart(text)])


@pytest.fixture(params=[True, False], ids=["memcmp", "portable"])
def fast(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param and not cursor_module._FAST:
        pytest.skip("this interpreter has no known list layout")
    monkeypatch.setattr(cursor_module, "_FAST", request.param)
    return bool(request.param)


def test_first_sight_is_replaced_from_zero(fast: bool) -> None:
    change = HistoryCursor().advance(_history(5))
    assert (change.kind, change.start, change.length, change.appended) == ("replaced", 0, 5, 5)


def test_unchanged_and_appended(fast: bool) -> None:
    messages, cursor = _history(10), HistoryCursor()
    cursor.advance(messages)
    assert cursor.advance(messages).kind == "unchanged"
    assert cursor.advance(list(messages)).kind == "unchanged"  # a copy of the list holds the same messages
    messages += _history(3)
    change = cursor.advance(messages)
    assert (change.kind, change.start, change.appended) == ("appended", 10, 3)
    assert change.is_append_only


@pytest.mark.parametrize("position", [0, 1, 500, 998])
def test_edit_in_place_anywhere_is_seen(fast: bool, position: int) -> None:
    messages, cursor = _history(1_000), HistoryCursor()
    cursor.advance(messages)
    messages[position] = _edit(messages[position], "new text")
    messages += _history(2)
    change = cursor.advance(messages)
    assert (change.kind, change.edited, change.start, change.appended) == ("edited", (position,), 1_000, 2)
    assert cursor.advance(messages).kind == "unchanged"


def test_an_equal_copy_is_not_an_edit(fast: bool) -> None:
    messages, cursor = _history(40), HistoryCursor()
    cursor.advance(messages)
    messages[3] = dataclasses.replace(messages[3])
    assert cursor.advance(messages).kind == "unchanged"


def test_mutating_the_same_object_is_seen_in_the_tail_and_with_verify(fast: bool) -> None:
    messages, cursor = _history(100), HistoryCursor()
    cursor.advance(messages)
    messages[-1].parts[0] = UserPromptPart("mutated") if isinstance(messages[-1], ModelRequest) else TextPart("m")
    assert cursor.advance(messages).edited == (99,)
    messages[5].parts.append(TextPart("more") if isinstance(messages[5], ModelResponse) else UserPromptPart("x"))
    assert cursor.peek(messages).kind == "unchanged"  # outside the checked tail: only a full check sees it
    assert cursor.advance(messages, verify=True).edited == (5,)


def test_replaced_rewound_and_different_history(fast: bool) -> None:
    messages, cursor = _history(50), HistoryCursor()
    cursor.advance(messages)
    change = cursor.advance(messages[:30])
    assert (change.kind, change.start, change.length) == ("replaced", 30, 30)
    other = messages[:20] + _history(15)
    change = cursor.advance(other)
    assert (change.kind, change.start, change.length) == ("replaced", 20, 35)
    empty = HistoryCursor()
    assert (empty.advance(()).kind, empty.advance(()).kind) == ("replaced", "unchanged")


def test_message_without_id_replaced_is_a_replacement(fast: bool) -> None:
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(str(i))]) for i in range(6)]
    cursor = HistoryCursor()
    cursor.advance(messages)
    messages[2] = ModelRequest(parts=[UserPromptPart("other")])
    change = cursor.advance(messages)
    assert (change.kind, change.start) == ("replaced", 2)


def test_fingerprints_of_the_tail_only(fast: bool) -> None:
    messages, cursor = _history(1_000), HistoryCursor(fingerprint_all=False)
    cursor.advance(messages)
    messages[-1].parts[0] = UserPromptPart("mutated") if isinstance(messages[-1], ModelRequest) else TextPart("m")
    assert cursor.advance(messages).edited == (999,)  # the tail is checked as with every fingerprint
    messages[500] = _edit(messages[500], "new text")  # another object with the same id: compared by value
    messages += _history(2)
    change = cursor.advance(messages)
    assert (change.kind, change.edited, change.start) == ("edited", (500,), 1_000)
    change = cursor.advance(messages[:600])  # the new tail was never fingerprinted: looked at again
    assert change.kind == "replaced" and 592 <= change.start <= 600
    assert cursor.advance(messages[:600]).kind == "unchanged"
    messages[5].parts.append(UserPromptPart("x") if isinstance(messages[5], ModelRequest) else TextPart("more"))
    change = cursor.advance(messages[:600], verify=True)  # unverifiable messages are reported, not trusted
    assert change.kind == "edited" and 5 in change.edited
    assert cursor.advance(messages[:600], verify=True).kind == "unchanged"  # fingerprinted from now on


def test_list_subclasses_keep_the_fast_comparison(fast: bool) -> None:
    class Mirroring(list[ModelMessage]):  # pydantic-ai's request list: appends mirrored, item access untouched
        def append(self, message: ModelMessage) -> None:
            super().append(message)

    class Lazy(list[ModelMessage]):
        def __getitem__(self, index: object) -> object:  # what indexing returns is not the item array
            return super().__getitem__(index)  # type: ignore[index]

    assert cursor_module._is_plain_list(Mirroring())
    assert not cursor_module._is_plain_list(Lazy())
    messages, cursor = _history(50), HistoryCursor()
    cursor.advance(messages)
    mirrored = Mirroring(messages)
    mirrored[10] = _history(1)[0]
    assert (cursor.peek(mirrored).kind, cursor.peek(mirrored).start) == ("replaced", 10)
    assert cursor.peek(Mirroring(messages)).kind == "unchanged"


def test_tuple_histories_work(fast: bool) -> None:
    messages, cursor = _history(30), HistoryCursor()
    cursor.advance(tuple(messages))
    assert cursor.advance((*messages[:-1], _edit(messages[-1], "x"))).edited == (29,)


def test_table_keys_by_first_message() -> None:
    table, a, b = CursorTable(max_size=2), _history(3), _history(3)
    table.cursor_for(a).advance(a)
    assert table.cursor_for(a).peek(a).kind == "unchanged"
    assert table.cursor_for(b).peek(b).kind == "replaced"
    table.cursor_for(b).advance(b)
    table.cursor_for(_history(1))  # evicts the least recently used (a)
    assert len(table) == 2
    assert table.cursor_for(a).peek(a).kind == "replaced"


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5)),
        st.tuples(st.just("edit"), st.integers(0, 200)),
        st.tuples(st.just("truncate"), st.integers(0, 200)),
        st.tuples(st.just("swap"), st.integers(0, 200)),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(start=st.integers(0, 60), ops=_ops, use_fast=st.booleans(), fingerprint_all=st.booleans())
def test_reported_change_matches_what_was_done(
    start: int, ops: list[tuple[str, int]], use_fast: bool, fingerprint_all: bool
) -> None:
    original_fast = cursor_module._FAST
    cursor_module._FAST = use_fast and original_fast
    try:
        messages, cursor = _history(start), HistoryCursor(fingerprint_all=fingerprint_all)
        cursor.advance(messages)
        for step, (op, arg) in enumerate(ops):
            before = list(messages)
            edited: set[int] = set()
            replaced_from: int | None = None
            if op == "append":
                messages += _history(arg)
            elif op == "edit" and messages:
                i = arg % len(messages)
                messages[i] = _edit(messages[i], f"edited {arg} at step {step}")
                edited.add(i)
            elif op == "truncate":
                cut = arg % (len(messages) + 1)
                if cut < len(messages):
                    replaced_from = cut
                del messages[cut:]
            elif op == "swap" and messages:
                i = arg % len(messages)
                messages[i] = _history(1)[0]
                replaced_from = i
            change = cursor.advance(messages)
            if replaced_from is not None and op == "truncate" and not fingerprint_all:
                # The messages that became the checked tail had no fingerprint: looked at again, never trusted.
                assert change.kind == "replaced" and replaced_from - 8 <= change.start <= replaced_from
            elif replaced_from is not None:
                assert change.kind == "replaced" and change.start == replaced_from
            elif edited:
                assert change.kind == "edited" and set(change.edited) == edited
                assert change.start == len(before)
            else:
                assert change.kind == ("appended" if len(messages) > len(before) else "unchanged")
            assert list(cursor.messages) == messages
    finally:
        cursor_module._FAST = original_fast


def test_seen_prefix_counts_the_same_objects_only(fast: bool) -> None:
    messages = _history(6)
    cursor = HistoryCursor()
    assert cursor.seen_prefix(messages) == 0  # nothing seen yet
    cursor.advance(messages[:4])
    assert cursor.seen_prefix(messages) == 4  # the 4 seen, then 2 new
    assert cursor.seen_prefix(messages[:3]) == 3  # a shorter history: its 3
    copy = list(messages)
    copy[1] = _edit(copy[1], "another object")
    assert cursor.seen_prefix(copy) == 0  # any seen message replaced: nothing is promised
    assert cursor.seen_prefix([]) == 0


def test_cursor_table_find_leaves_the_table_as_it_is() -> None:
    table = CursorTable(max_size=2)
    messages = _history(4)
    assert table.find(messages) is None and len(table) == 0  # nothing made
    cursor = table.cursor_for(messages)
    cursor.advance(messages)
    assert table.find(messages) is cursor and table.find(list(messages)) is cursor  # found by the first object
    edited = [_edit(messages[0], "an edited copy"), *messages[1:]]
    assert table.find(edited) is None  # not the same first object: no lookup by id, nothing moved
    assert table.cursor_for(edited) is cursor  # cursor_for still finds it by the message id
    assert table.find([]) is None
