"""What makes a `JsonHistoryStore` a `SearchableHistoryStore`: scan search, added search text, every version.

Text added with `add_search_text` lives beside the history in `messages.json.search-text.json` (a JSON object,
message id -> text, replaced atomically), so the history file itself stays a plain array of messages.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic_ai.messages import ModelMessage

from ._protocol import HistoryStoreError
from ._reader import read_records

__all__ = ["load_search_texts", "load_versions", "save_search_text", "save_search_texts", "search_texts_path"]


def search_texts_path(history: Path) -> Path:
    return history.with_name(history.name + ".search-text.json")


def load_search_texts(history: Path) -> dict[str, str]:
    path = search_texts_path(history)
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise HistoryStoreError(f"cannot read the search text of {history} ({path}): {exc}") from exc
    if not isinstance(data, dict):
        raise HistoryStoreError(f"{path} is not a JSON object of message id -> text")
    return {str(k): str(v) for k, v in data.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def save_search_text(history: Path, message_id: str, text: str) -> None:
    """Set the text of one message (sync; the store's lock is held by the caller)."""
    save_search_texts(history, {**load_search_texts(history), message_id: text})


def save_search_texts(history: Path, texts: dict[str, str]) -> None:
    """Replace the search texts of `history` with `texts`, atomically (sync; no writer may run at the same time)."""
    path = search_texts_path(history)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        raise HistoryStoreError(f"cannot write the search text of {history} ({path}): {exc}") from exc


def load_versions(history: Path) -> list[ModelMessage]:
    """Every record of the file in file order, older versions included (damaged records are skipped)."""
    return [record.message for record in read_records(history).records]
