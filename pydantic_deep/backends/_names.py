r"""File names as the model sees them: always printable, valid UTF-8, one spelling per file.

A file name on disk is a sequence of bytes (on POSIX), and not every byte sequence is UTF-8 text: such a name cannot
go into a tool result or messages.json as it is. Virtual paths therefore spell names with two escapes:

- `\xHH` (two lowercase hex digits) stands for the byte `HH`. It is used for every byte that is not part of valid
  UTF-8, and for every byte of a control character (a newline is `\x0a`, DEL is `\x7f`, U+0085 is `\xc2\x85`) or a
  line/paragraph separator (U+2028/U+2029), so that a name never breaks a listing into two lines;
- `\\` stands for one backslash, so that a name that merely *looks* like an escape (`a\x41` typed with a real
  backslash) is spelled `a\\x41` and never confused with the byte `0x41`.

Any other backslash is an error (`PathEscapeError`): `C:\Windows` or `..\x` is refused rather than guessed at.
Escapes are decoded before `.`/`..` are interpreted, so `\x2e\x2e` is `..` (and cannot climb above the root either);
`\x2f` (`/`) and `\x00` are refused. The model can copy an escaped name from `ls`, `glob` or `grep` output and
pass it back to any tool: `read_file("/bad\xff.txt")` reads the file whose name is the bytes `bad`, `0xFF`, `.txt`.

>>> print(escape_name(b"bad\xff.txt"), escape_name("tab\there"), escape_name(r"a\x41"))
bad\xff.txt tab\x09here a\\x41
>>> unescape_name(r"bad\xff.txt")
b'bad\xff.txt'
"""

from __future__ import annotations

import unicodedata

__all__ = ["escape_name", "name_needs_escape", "shown_text", "unescape_name"]

_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPED_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})


def _char_needs_escape(char: str) -> bool:
    return char == "\\" or unicodedata.category(char) in _ESCAPED_CATEGORIES or "\ud800" <= char <= "\udfff"


def name_needs_escape(name: str) -> bool:
    """Whether the text `name` is not already in canonical form (it holds a backslash, a control character, a
    line separator or a surrogate)."""
    if name.isprintable() and "\\" not in name:
        return False
    return any(_char_needs_escape(c) for c in name)


def _raw_bytes(char: str) -> bytes:
    """The bytes a character of a name stands for: a surrogate from `os.fsdecode` is the byte it escaped."""
    try:
        return char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate outside U+DC80..U+DCFF (e.g. from JSON "\ud800")
        return char.encode("utf-8", "surrogatepass")


def escape_name(name: bytes | str) -> str:
    """The canonical spelling of a file name (bytes, or text as `os.fsdecode` gives it, surrogates included)."""
    if isinstance(name, str):
        if not name_needs_escape(name):
            return name
        name = b"".join(_raw_bytes(c) for c in name)
    text = name.decode("utf-8", "surrogateescape")
    if not name_needs_escape(text):
        return text
    out: list[str] = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif "\udc80" <= char <= "\udcff":  # a byte that is not valid UTF-8
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif _char_needs_escape(char):
            out.append("".join(f"\\x{b:02x}" for b in char.encode("utf-8")))
        else:
            out.append(char)
    return "".join(out)


def shown_text(text: str, max_chars: int = 200) -> str:
    """`text` quoted for a message: control characters and surrogates escaped, backslashes left as typed."""
    if name_needs_escape(text):
        text = "".join(c if c == "\\" or not _char_needs_escape(c) else escape_name(c) for c in text)
    if len(text) > max_chars:
        return f"'{text[:max_chars]}…' ({len(text):,} chars)"
    return f"'{text}'"


def unescape_name(name: str) -> bytes:
    """The bytes a (possibly escaped) name stands for; `ValueError` for a backslash that starts no valid escape.

    Raw characters that the canonical form would escape (a newline, a surrogate) are accepted as the bytes they
    stand for, so `unescape_name("a\\nb") == unescape_name("a\\\\x0ab")`.
    """
    if "\\" not in name:
        return b"".join(_raw_bytes(c) for c in name) if name_needs_escape(name) else name.encode("utf-8")
    out = bytearray()
    i, n = 0, len(name)
    while i < n:
        char = name[i]
        if char != "\\":
            out += _raw_bytes(char)
            i += 1
            continue
        following = name[i + 1 : i + 2]
        if following == "\\":
            out += b"\\"
            i += 2
        elif following == "x" and len(name) >= i + 4 and name[i + 2] in _HEX and name[i + 3] in _HEX:
            out.append(int(name[i + 2 : i + 4], 16))
            i += 4
        else:
            raise ValueError(
                f"a backslash in a path starts an escape: \\xHH for the byte HH or \\\\ for a backslash, not "
                f"{shown_text(name[i : i + 4])}. Use '/' as the path separator"
            )
    return bytes(out)
