"""One URL selects where histories live: `file://`, `sqlite:///` or `postgresql://`.

- `file:///abs/sessions` or `file://relative/sessions`: a folder of `<session_id>/messages.json` (the default layout);
  a plain path without a scheme means the same.
- `sqlite:///relative.db`, `sqlite:////abs/path.db` (SQLAlchemy's convention: three slashes, then the path).
- `postgresql://user:password@host:5432/db?sslmode=...` (also `postgres://`): psycopg's connection string; needs the
  `postgres` extra. The PostgreSQL implementation is imported only when such a URL is opened.

Passwords never appear in messages: every error and `HistoryDatabase.url` goes through `redact_url`.
"""

from __future__ import annotations

import importlib
import os
import re
from types import ModuleType
from typing import Any, cast
from urllib.parse import unquote, urlsplit

from ._database import HistoryDatabase, SearchableHistoryStore
from ._protocol import HistoryStoreError

__all__ = [
    "DEFAULT_SESSION_ID",
    "StoreURLError",
    "file_path",
    "open_database",
    "open_store",
    "redact_url",
    "store_kind",
]

DEFAULT_SESSION_ID = "default"
_POSTGRES_SCHEMES = ("postgresql", "postgres")
_PASSWORD_PARAMETER = re.compile(r"(?i)([?&]password=)[^&#]*")


class StoreURLError(HistoryStoreError, ValueError):
    """A store URL that cannot be opened (unknown scheme, missing path, missing driver); says what to pass."""


def redact_url(url: str) -> str:
    """`url` with its password (in the authority, or a `password=` query parameter) replaced by `***`."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return "<unparsable URL>"
    redacted = url
    if "@" in netloc:
        userinfo = netloc.rsplit("@", 1)[0]
        if ":" in userinfo:
            redacted = redacted.replace(userinfo + "@", userinfo.split(":", 1)[0] + ":***@", 1)
    return _PASSWORD_PARAMETER.sub(r"\1***", redacted)


def store_kind(url: str) -> str:
    """`file`, `sqlite` or `postgresql` for a store URL (a plain path is `file`); `StoreURLError` otherwise."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("", "file"):
        return "file"
    if scheme == "sqlite":
        return "sqlite"
    if scheme in _POSTGRES_SCHEMES:
        return "postgresql"
    raise StoreURLError(
        f"unknown store URL scheme {scheme!r} in {redact_url(url)}: use file:///path/to/sessions, "
        "sqlite:///path/to/history.db or postgresql://user@host/db"
    )


def _path_after(url: str, prefix: str) -> str:
    path = url[len(prefix) :] if url.lower().startswith(prefix) else url
    if not path:
        raise StoreURLError(f"{redact_url(url)} names no path; e.g. {prefix}sessions")
    return path


def file_path(url: str) -> str:
    """The path of a `file://` URL (percent-escapes decoded, as `Path.as_uri()` writes them) or a plain path."""
    return unquote(_path_after(url, "file://")) if url.lower().startswith("file://") else url


def open_database(url: str | os.PathLike[str], **options: Any) -> HistoryDatabase:
    """The `HistoryDatabase` at `url` (see the module docs for the forms). Nothing is connected or created until
    first use, except that the PostgreSQL driver is imported. `options` go to the implementation (e.g. `fsync`,
    `lock_timeout` for files; pool settings for PostgreSQL)."""
    text = os.fspath(url)
    kind = store_kind(text)
    if kind == "file":
        from ._json_database import JsonHistoryDatabase

        return JsonHistoryDatabase(file_path(text), **options)
    if kind == "sqlite":
        module = importlib.import_module(f"{__package__}._sqlite")
        return cast(HistoryDatabase, module.SQLiteHistoryDatabase(_path_after(text, "sqlite:///"), **options))
    return _open_postgres(text, **options)


def _open_postgres(url: str, **options: Any) -> HistoryDatabase:
    module = import_postgres_support(f"{__package__}._postgres", url)
    return cast(HistoryDatabase, module.open_postgres_database(url, **options))


def import_postgres_support(module_name: str, url: str) -> ModuleType:
    """Import `module_name` (a module that needs psycopg), or say how to install what `url` needs."""
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise StoreURLError(
            f"{redact_url(url)} needs PostgreSQL support: pip install 'summarization-pydantic-ai[postgres]' "
            f"(psycopg 3 and psycopg-pool); import failed: {exc}"
        ) from exc


def open_store(url: str | os.PathLike[str], session_id: str | None = None, **options: Any) -> SearchableHistoryStore:
    """The store of one session at `url`. For `file://` a URL ending in `.json` is that history file itself;
    otherwise `session_id` (default `"default"`) selects the session of the database."""
    text = os.fspath(url)
    if store_kind(text) == "file" and text.lower().endswith(".json"):
        from ._json_store import JsonHistoryStore

        if session_id is not None:
            raise StoreURLError(f"{redact_url(text)} is one history file; pass its folder to choose a session")
        return JsonHistoryStore.open(file_path(text), **options)
    return open_database(text, **options).session(session_id or DEFAULT_SESSION_ID)
