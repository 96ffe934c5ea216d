"""Arguments, dispatch, and the rule that every failure is one line on stderr and a non-zero status."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Generator
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console

from summarization_pydantic_ai import HistoryStoreError, HistoryStoreLockedError, InvalidSessionIdError
from summarization_pydantic_ai.store import file_path, store_kind

from ..checkpoints import CheckpointNotFoundError, InvalidCheckpointIdError
from ..sessions import ForkPointError, MessageNotFoundError, SessionExistsError, SessionNotFoundError
from ..storage import STORE_ENV, StorageError
from ._errors import EXIT_ERROR, EXIT_USAGE, CliError
from ._models import MODEL_OPTIONS

__all__ = ["build_parser", "run"]

PROG = "pydantic-deep"
DEFAULT_SESSION_DIR = Path(".pydantic-deep")
EXIT_INTERRUPTED = 130
_PIPED_WIDTH = 120


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see {self.prog} --help)", EXIT_USAGE)


def _session_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session-dir",
        type=Path,
        default=Path(os.environ.get("PYDANTIC_DEEP_DIR", DEFAULT_SESSION_DIR)),
        metavar="DIR",
        help="where sessions live: DIR/sessions/<id>/messages.json (default: .pydantic-deep, or $PYDANTIC_DEEP_DIR)",
    )


def _store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        default=os.environ.get(STORE_ENV) or None,
        metavar="URL",
        help="where sessions live instead of --session-dir: file:///dir, sqlite:///file.db or postgresql://... "
        f"(default: ${STORE_ENV})",
    )


def _usd(text: str) -> Decimal:
    try:
        amount = Decimal(text.strip().removeprefix("$"))
    except ArithmeticError:
        raise argparse.ArgumentTypeError(f"not an amount in US dollars: {text!r}") from None
    if not amount.is_finite() or amount <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive amount in US dollars, got {text!r}")
    return amount


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Chat with a deep agent whose context cannot blow up; inspect sessions.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    chat = commands.add_parser("chat", help="chat with the agent in a directory (a REPL)")
    chat.add_argument("--model", metavar="NAME", help=f"the model: {MODEL_OPTIONS} (default: $PYDANTIC_DEEP_MODEL)")
    chat.add_argument("--resume", metavar="ID", help="continue a session")
    chat.add_argument("--fork", action="store_true", help="with --resume: continue in a copy of the session")
    chat.add_argument("--workdir", type=Path, default=Path("."), metavar="DIR", help="the agent's files (default: .)")
    chat.add_argument(
        "--max-cost",
        type=_usd,
        metavar="USD",
        help="stop before a request would take the session's cost (earlier chats included) past USD",
    )
    _session_dir(chat)
    _store(chat)

    sessions = commands.add_parser("sessions", help="list the sessions")
    _session_dir(sessions)
    _store(sessions)

    show = commands.add_parser("show", help="print a session's full history")
    show.add_argument("id", metavar="ID")
    show.add_argument("--full", action="store_true", help="do not shorten long parts")
    _session_dir(show)
    _store(show)

    search = commands.add_parser("search", help="search a session's full history (compacted messages too)")
    search.add_argument("id", metavar="ID")
    search.add_argument("query", nargs="+", metavar="QUERY")
    _session_dir(search)
    _store(search)

    export = commands.add_parser("export", help="write a session's full history as Markdown or JSON")
    export.add_argument("id", metavar="ID")
    export.add_argument("--format", choices=("md", "json"), default="md")
    export.add_argument("--output", "-o", type=Path, metavar="FILE", help="default: standard output")
    _session_dir(export)
    _store(export)

    move = commands.add_parser("migrate", help="copy sessions, memories and checkpoints between stores, losslessly")
    move.add_argument("--from", dest="source", required=True, metavar="URL", help="file:///dir, sqlite:///file.db, ...")
    move.add_argument("--to", dest="destination", required=True, metavar="URL", help="where to copy them")
    move.add_argument("--session", action="append", metavar="ID", help="only this session (repeatable)")

    report = commands.add_parser("report", help="write a session's report: one HTML page (context, cost, events)")
    report.add_argument("id", metavar="ID")
    report.add_argument(
        "--out",
        "-o",
        type=Path,
        metavar="FILE",
        help="default: report.html in the session's folder (with a database --store: ID-report.html here)",
    )
    _session_dir(report)
    _store(report)

    demo = commands.add_parser("demo", help="an offline, scripted coding-agent session (no API key)")
    demo.add_argument("--dir", type=Path, metavar="DIR", help="where to run it (default: a new temporary directory)")
    demo.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="pause between steps, to watch")
    return parser


async def _dispatch(args: argparse.Namespace, console: Console) -> int:
    from . import _commands

    command: str = args.command
    store: str | None = getattr(args, "store", None)
    if store is not None and store_kind(store) == "file":
        args.session_dir = Path(file_path(store))  # today's layout: the same as --session-dir
    elif store is not None:
        return await _dispatch_store(args, store, console)
    if command == "migrate":
        from ._store_commands import migrate_stores

        return await migrate_stores(args.source, args.destination, args.session, console)
    if command == "chat":
        from ._chat import ChatOptions, chat

        options = ChatOptions(args.model, args.resume, args.fork, args.session_dir, args.workdir, args.max_cost)
        return await chat(options, console)
    if command == "sessions":
        return _commands.list_sessions(args.session_dir, console)
    if command == "show":
        return _commands.show_session(args.session_dir, args.id, console, full=args.full)
    if command == "search":
        return await _commands.search_session(args.session_dir, args.id, " ".join(args.query), console)
    if command == "export":
        return _commands.export_session(args.session_dir, args.id, args.format, args.output)
    if command == "report":
        return await _commands.report_session(args.session_dir, args.id, args.out, console)
    from ._demo import run_demo

    return await run_demo(args.dir, console, delay=args.delay)


async def _dispatch_store(args: argparse.Namespace, url: str, console: Console) -> int:
    from . import _store_commands as stored

    command: str = args.command
    if command == "chat":
        from ._chat import ChatOptions, chat

        options = ChatOptions(
            args.model, args.resume, args.fork, args.session_dir, args.workdir, args.max_cost, store=url
        )
        return await chat(options, console)
    if command == "report":
        return await stored.report_stored(url, args.id, args.out, console)
    if command == "sessions":
        return await stored.list_stored(url, args.session_dir, console)
    if command == "show":
        return await stored.show_stored(url, args.id, console, full=args.full)
    if command == "search":
        return await stored.search_stored(url, args.id, " ".join(args.query), console)
    return await stored.export_stored(url, args.id, args.format, args.output)


def _one_line(exc: BaseException) -> str:
    return (str(exc).strip() or type(exc).__name__).splitlines()[0]


@contextlib.contextmanager
def _quiet_logging(console: Console) -> Generator[None]:
    """Library warnings as one dim line each, never a traceback on the screen (restored afterwards: `run` is also
    called in-process)."""

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            console.print(f"  ({record.getMessage().splitlines()[0]})", style="dim", markup=False, highlight=False)

    # psycopg's pool logs each failed connection attempt while it retries; the error that ends them says it once.
    levels = {"summarization_pydantic_ai": logging.WARNING, "pydantic_deep": logging.WARNING, "psycopg.pool": 100}
    loggers = [logging.getLogger(name) for name in levels]
    saved = [(logger.handlers[:], logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.handlers[:] = [_Handler(levels[logger.name])]
        logger.propagate = False
    try:
        yield
    finally:
        for logger, (handlers, propagate) in zip(loggers, saved, strict=True):
            logger.handlers[:] = handlers
            logger.propagate = propagate


def run(argv: list[str]) -> int:
    os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")  # the screen is ours
    # Piped output (a log, a test) gets 120 columns rather than rich's 80, so tables are not squeezed.
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    console = Console(highlight=False, width=_PIPED_WIDTH if piped else None)
    errors = Console(stderr=True, highlight=False)
    try:
        args: Any = build_parser().parse_args(argv)
        if args.command is None:
            build_parser().print_help()
            return EXIT_USAGE
        # A command whose standard output is data (export) gives its notes on standard error.
        with _quiet_logging(errors if args.command == "export" else console):
            return asyncio.run(_dispatch(args, console))
    except CliError as exc:
        errors.print(f"{PROG}: {exc}", markup=False, soft_wrap=True)
        return exc.status
    except (
        InvalidSessionIdError,
        SessionNotFoundError,
        SessionExistsError,
        MessageNotFoundError,
        ForkPointError,
        CheckpointNotFoundError,
        InvalidCheckpointIdError,
    ) as exc:
        errors.print(f"{PROG}: {_one_line(exc)}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    except HistoryStoreLockedError as exc:
        errors.print(f"{PROG}: the session is open in another process ({_one_line(exc)})", markup=False)
        return EXIT_ERROR
    except (HistoryStoreError, StorageError) as exc:
        errors.print(f"{PROG}: {_one_line(exc)}", markup=False, soft_wrap=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        errors.print(f"{PROG}: interrupted", markup=False)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get("PYDANTIC_DEEP_DEBUG"):
            raise
        errors.print(
            f"{PROG}: unexpected {type(exc).__name__}: {_one_line(exc)} (PYDANTIC_DEEP_DEBUG=1 shows the traceback)",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_ERROR
