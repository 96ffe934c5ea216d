"""`python -m summarization_pydantic_ai.evals`: run the probes on a built-in strategy, from the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from ..context_manager import ContextManagerMiddleware
from ..processors import SlidingWindowProcessor, SummarizationProcessor
from ..store import JsonHistoryStore
from ._derive import derive_probes, load_messages
from ._families import SESSION_FAMILIES, build_family_session
from ._probes import Probe
from ._report import ProbeReport
from ._run import CompactFn, arun_probes
from ._session import MIN_MESSAGES, Session

__all__ = ["main"]

STRATEGIES = ("summarization", "sliding", "middleware")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m summarization_pydantic_ai.evals",
        description="Score how much of a session a compaction strategy keeps answerable (deterministic, offline).",
    )
    parser.add_argument("--messages", type=int, default=200, help="size of the generated session (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated session (default 0)")
    parser.add_argument(
        "--family", choices=sorted(SESSION_FAMILIES), default="coding", help="the generated session's family"
    )
    parser.add_argument("--strategy", choices=STRATEGIES, default="summarization")
    parser.add_argument("--keep", type=int, default=20, help="messages kept verbatim after the summary (default 20)")
    parser.add_argument("--replay", action="store_true", help="feed the session request by request, as a run does")
    parser.add_argument("--trigger", type=int, default=100, help="with --replay: compact at this many messages")
    parser.add_argument("--max-tokens", type=int, default=20_000, help="with --replay: the middleware's window")
    parser.add_argument("--path", type=Path, help="probe your own session: a messages.json (or a JSON message list)")
    parser.add_argument("--probes", type=Path, help="a JSON list of probes {category, question, expected, patterns}")
    parser.add_argument("--category", action="append", help="score only these categories (repeatable)")
    parser.add_argument("--min-score", type=float, default=0.0, help="exit with 1 when the score is below (0-1)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the probes as the command line asks; returns the exit code (1: the score is below `--min-score`)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not 0 <= args.min_score <= 1:
        parser.error(f"--min-score is a fraction between 0 and 1, got {args.min_score}")
    if args.keep < 0 or args.trigger <= args.keep:
        parser.error("--keep must be >= 0 and --trigger larger than --keep")
    try:
        session = _session(args)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    report = asyncio.run(_run(args, session))
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.table())
    return 1 if report.score < args.min_score else 0


def _session(args: argparse.Namespace) -> Session:
    if args.path is not None:
        messages = load_messages(args.path)
        session = Session(messages, derive_probes(messages), None, f"{args.path} ({len(messages)} messages)")
    else:
        if args.messages < MIN_MESSAGES:
            raise ValueError(f"--messages must be at least {MIN_MESSAGES}")
        session = build_family_session(args.family, args.messages, args.seed)
    probes = [*session.probes, *(_read_probes(args.probes) if args.probes else [])]
    if args.category:
        probes = [p for p in probes if p.category in set(args.category)]
    return Session(session.messages, probes, session.seed, session.name)


def _read_probes(path: Path) -> list[Probe]:
    data: Any = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of probes")
    probes: list[Probe] = []
    for item in cast(list[Any], data):
        if not isinstance(item, dict):
            raise ValueError(f"{path}: each probe is an object with category, question and expected")
        fields = cast(dict[str, Any], item)
        try:
            probes.append(
                Probe(fields["category"], fields["question"], fields["expected"], tuple(fields.get("patterns", ())))
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: invalid probe {fields!r}: {exc}") from exc
    return probes


async def _run(args: argparse.Namespace, session: Session) -> ProbeReport:
    keep, trigger = args.keep, args.trigger if args.replay else args.keep + 1
    if args.strategy == "summarization":
        processor = SummarizationProcessor(None, trigger=("messages", trigger), keep=("messages", keep))
        return await arun_probes(processor, session, replay=args.replay, name=_name(args))
    if args.strategy == "sliding":
        window = SlidingWindowProcessor(trigger=("messages", trigger), keep=("messages", keep))
        return await arun_probes(window, session, replay=args.replay, name=_name(args))
    with tempfile.TemporaryDirectory() as folder:
        store = JsonHistoryStore(Path(folder) / "messages.json")
        middleware = ContextManagerMiddleware(
            max_tokens=args.max_tokens, keep=("messages", keep), summarization_model=None, history_store=store
        )
        compact: CompactFn = middleware if args.replay else middleware.compact
        try:
            return await arun_probes(compact, session, rehydrate=store, replay=args.replay, name=_name(args))
        finally:
            store.close()


def _name(args: argparse.Namespace) -> str:
    trigger = f"window {args.max_tokens:,} tokens" if args.strategy == "middleware" else f"trigger {args.trigger}"
    mode = f"replayed, {trigger}" if args.replay else "one compaction"
    summary = "no summary" if args.strategy == "sliding" else "deterministic summary"
    return f"{args.strategy} ({summary}, keep {args.keep}, {mode})"
