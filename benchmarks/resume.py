"""Resuming a long session from messages.json (issue 22): `load()` against the decoder, against history length,
and the first token count of the loaded history against vstorm's summarization-pydantic-ai 0.1.11.

    python benchmarks/resume.py                           # writes the "resume" section of docs/benchmarks.md
    python benchmarks/resume.py --quick --no-write
    python benchmarks/resume.py --peer-python /tmp/peer-venv/bin/python

1. Never compacted, 20,000 messages: `JsonHistoryStore.reader(path).load()` (a fresh reader: what `resume()` and a
   new process do) against `ModelMessagesTypeAdapter.validate_json` of the same messages, alternated, medians.
2. Compacted every 1,000 messages (each summary says what it kept, as the middleware writes them), the latest
   summary 100 messages from the end: `load()` at 5,000 and at 50,000 messages, alternated, medians.
3. The first count of a loaded 10,000-message history: our `count_tokens_approximately` against the peer's,
   alternated, each on freshly decoded messages. The peer has the same distribution name as ours, so it lives in a
   venv of its own (`--peer-python`, default `/tmp/peer-venv/bin/python`); it is run in a subprocess that times
   its count itself. Without it the row says so.
   Each count is the first of a fresh process (`python -c`), so neither counts next to the other's heap. Ours is
   what a resume does (`load()`, which measures the messages it decoded, in its worker thread), and, for
   reference, the same history decoded by `validate_json` outside the store and measured cold by the count.
4. After a resume, the first call that needs every record (an append, `len()`) indexes the file once: timed too.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, from a checkout

from _common import build_history, environment, fmt_time, write_section
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelMessagesTypeAdapter, ModelRequest

from summarization_pydantic_ai import JsonHistoryStore, ensure_message_id, get_message_id
from summarization_pydantic_ai._messages import SUMMARY_METADATA_KEY

SECTION = "resume"
COMPACT_EVERY = 1_000
TAIL = 100
PEER = "/tmp/peer-venv/bin/python"
_COUNT_SCRIPT = """
import gc, json, sys, time
from pydantic_ai.messages import ModelMessagesTypeAdapter
if sys.argv[3] == "peer":
    from pydantic_ai_summarization import count_tokens_approximately
else:
    from summarization_pydantic_ai import JsonHistoryStore, count_tokens_approximately
def load(path):
    if sys.argv[3] == "ours":  # what resume() does: the store's load, which measures what it decoded
        return JsonHistoryStore.reader(path).load_sync()
    return ModelMessagesTypeAdapter.validate_json(open(path, "rb").read())  # decoded elsewhere
times = []
for _ in range(int(sys.argv[2])):
    messages = load(sys.argv[1])
    gc.collect()
    started = time.perf_counter()
    count_tokens_approximately(messages)
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""
"""Times the first count of a freshly loaded history, in a process of its own (ours or the peer's interpreter):
the two sides count with the same heap around them."""


def _messages(size: int) -> list[ModelMessage]:
    history, _ = build_history(size - 1)
    for message in history:
        ensure_message_id(message)
    return history


def _summary(history: list[ModelMessage], start: int, mark: int, previous: list[str]) -> ModelMessage:
    """A summary as the middleware records it: what it covers, and the working context kept around it."""
    info: dict[str, Any] = {
        "covers": [get_message_id(m) for m in history[max(1, start - 4) : mark - 4]],
        "replaces_summaries": previous[-1:],
        "working_before": [get_message_id(history[0])],
        "working_after": [get_message_id(m) for m in history[mark - 4 : mark]],
    }
    text = "Summary: the retry loop in the batch handlers swallowed the error; fixed in modules so far. " * 12
    summary = ModelRequest(parts=[CompactionPart(content=text, metadata={SUMMARY_METADATA_KEY: info})])
    ensure_message_id(summary)
    return summary


def write_session(path: Path, size: int, *, compacted: bool) -> list[ModelMessage]:
    """A session of `size` messages (appended in batches of up to 1,000, as long runs do); compacted: a summary
    every 1,000 messages, the latest `TAIL` messages from the end. Returns the messages recorded."""
    history = _messages(size)
    store = JsonHistoryStore(path)
    recorded: list[ModelMessage] = []
    cut = size - TAIL if compacted else size
    marks = [*range(COMPACT_EVERY, cut, COMPACT_EVERY), cut] if compacted else list(range(1_000, size, 1_000))
    start, summaries = 0, []
    for mark in [*marks, size]:
        batch = history[start:mark]
        if compacted and mark <= cut:
            summary = _summary(history, start, mark, summaries)
            summaries.append(get_message_id(summary) or "")
            batch = [*batch, summary]
        store.append_sync(batch)
        recorded += batch
        start = mark
    store.close()
    return recorded


def _load(path: Path) -> list[ModelMessage]:
    reader = JsonHistoryStore.reader(path)
    try:
        return reader.load_sync()
    finally:
        reader.close()


def _timed(action: Callable[[], object]) -> float:
    gc.collect()
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _alternated(rounds: int, a: Callable[[], object], b: Callable[[], object]) -> tuple[list[float], list[float]]:
    """`rounds` timings of each, alternating which goes first."""
    first: list[float] = []
    second: list[float] = []
    for i in range(rounds):
        if i % 2:
            second.append(_timed(b))
            first.append(_timed(a))
        else:
            first.append(_timed(a))
            second.append(_timed(b))
    return first, second


@dataclass
class Row:
    label: str
    ours: float
    floor: float
    floor_label: str
    target: str

    @property
    def ratio(self) -> float:
        return self.ours / self.floor


def _first_counts(python: str, history_file: Path, side: str, rounds: int) -> list[float] | None:
    command = [python, "-c", _COUNT_SCRIPT, str(history_file), str(rounds), side]
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return json.loads(done.stdout) if done.returncode == 0 else None


def run(quick: bool, peer: str) -> tuple[list[Row], list[str]]:
    rounds = 3 if quick else 7
    rows: list[Row] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        plain = root / "plain.json"
        recorded = write_session(plain, 20_000, compacted=False)
        encoded = ModelMessagesTypeAdapter.dump_json(recorded)
        assert len(_load(plain)) == len(recorded)
        ours, floor = _alternated(rounds, lambda: _load(plain), lambda: ModelMessagesTypeAdapter.validate_json(encoded))
        rows.append(
            Row(
                "never compacted, 20,000 messages: `load()`",
                statistics.median(ours),
                statistics.median(floor),
                "`validate_json` of the same messages",
                "<= 1.3x",
            )
        )
        print(f"  resume: 20,000 never compacted: {fmt_time(rows[-1].ours)} vs {fmt_time(rows[-1].floor)}", flush=True)

        small, large = root / "small.json", root / "large.json"
        write_session(small, 5_000, compacted=True)
        write_session(large, 50_000, compacted=True)
        assert len(_load(small)) == len(_load(large))
        big, little = _alternated(rounds * 4, lambda: _load(large), lambda: _load(small))
        rows.append(
            Row(
                f"compacted, summary {TAIL} from the end: `load()` at 50,000 messages",
                statistics.median(big),
                statistics.median(little),
                "the same at 5,000 messages",
                "< 50 ms, <= 1.3x",
            )
        )
        print(f"  resume: 50,000 compacted {fmt_time(rows[-1].ours)}, 5,000 {fmt_time(rows[-1].floor)}", flush=True)

        counted = root / "counted.json"
        write_session(counted, 10_000, compacted=False)
        times: dict[str, list[float]] = {"peer": [], "ours": [], "cold": []}
        for i in range(rounds):  # alternated: each side goes first in turn
            sides = [(peer, "peer"), (sys.executable, "ours"), (sys.executable, "cold")]
            for python, side in sides[i % 3 :] + sides[: i % 3]:
                found = _first_counts(python, counted, side, 1)  # a fresh process: its first count
                if found is not None:
                    times[side] += found
        if times["peer"] and len(times["peer"]) == len(times["ours"]):
            peer_median = statistics.median(times["peer"])
            rows.append(
                Row(
                    "first count of a history `load()` returned, 10,000 messages",
                    statistics.median(times["ours"]),
                    peer_median,
                    "vstorm summarization-pydantic-ai 0.1.11",
                    "<= 1.0x",
                )
            )
            rows.append(
                Row(
                    "first count of the same history decoded elsewhere (`validate_json`)",
                    statistics.median(times["cold"]),
                    peer_median,
                    "vstorm summarization-pydantic-ai 0.1.11",
                    "(measured cold)",
                )
            )
        else:
            notes.append(f"The peer's count was not measured: no working peer interpreter at {peer}.")

        writer = JsonHistoryStore.open(large)
        writer.load_sync()
        first_index = _timed(lambda: len(writer))
        writer.close()
        notes.append(
            f"After a resume through the resume point, the first call that needs every record (the first append, "
            f"`len()`, a read by ids) indexes the file once, from its checksums and ids without decoding: "
            f"{fmt_time(first_index)} at 50,000 messages ({large.stat().st_size / 1e6:.0f} MB)."
        )
    return rows, notes


def markdown_lines(rows: list[Row], notes: list[str], env: str) -> list[str]:
    lines = [
        "## Resuming a session from messages.json (issue 22)",
        "",
        "Produced by `python benchmarks/resume.py`: a fresh reader's `load()` (what `SessionManager.resume()` and a",
        "new process do), medians of alternated runs. The compacted sessions have a summary every 1,000 messages",
        "(recorded as the middleware records them: what it covers and the working context kept around it).",
        "",
        "| case | ours | against | ratio | target |",
        "|---|---:|---|---:|---|",
    ]
    lines += [
        f"| {r.label} | {fmt_time(r.ours)} | {r.floor_label}: {fmt_time(r.floor)} | {r.ratio:.2f}x | {r.target} |"
        for r in rows
    ]
    lines += ["", *(f"- {note}" for note in notes)]
    lines += [
        "- `load()` measures the messages it decoded for `count_tokens_approximately` (in its worker thread, while"
        " they are in the CPU's caches; part of the load rows above), so the first count of a resumed history, and"
        " the middleware's count at the first request of a resumed run, measure only what is new. The peer measures"
        " less per message (text lengths; tool calls are not counted) and nothing ahead.",
    ]
    lines += [
        "- `load()` reads the resume point beside the file (`messages.json.resume`: where the latest summary's"
        " records start, the records it kept, the newer versions written since), then only the bytes from that"
        " summary on and the kept records, checks each record's checksum, and decodes them in one `validate_json`"
        " call. A never-compacted file is decoded in place, as one array. Without a point that describes the file"
        " (an older file, a crash between the two writes) the whole file is read once, exactly as before.",
        f"- Environment: {env}",
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--peer-python", default=PEER)
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    rows, notes = run(args.quick, args.peer_python)
    lines = markdown_lines(rows, notes, environment())
    print("\n".join(lines))
    if not args.no_write:
        write_section(args.output, SECTION, lines)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
