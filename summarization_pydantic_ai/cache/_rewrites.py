"""What a request changed in the history its predecessor sent: where, how many tokens it removed, and how many
tokens it made the cache write again that it would otherwise have read.

Only the part after the first changed position is looked at: nothing for a request that merely grew, the
rewritten tail for a reduction (O(tail), once per reduction).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._prompt_cache import FIRST_MESSAGE

__all__ = ["PreviousRequest", "Rewrite"]

_NEW_PER_REQUEST = 2
"""A request adds its predecessor's answer and one request: the new messages when none of the old ones remain."""


@dataclass(frozen=True)
class Rewrite:
    changed_at: int
    """The message index of the first change; -1 for the instructions or the tool definitions."""
    tokens_removed: int
    """Tokens the previous request's context lost (what was dropped, minus what replaced it), new messages aside."""
    rewrite_tokens: int
    """Tokens this request wrote (or sent uncached) again that an intact prefix would have let it read."""


@dataclass
class PreviousRequest:
    """The previous request from position `first` on: its chained keys, fingerprints and tokens per position."""

    first: int
    length: int
    hashes: list[bytes]
    fingerprints: list[bytes]
    tokens: list[int]

    @classmethod
    def cut(cls, hashes: list[bytes], fingerprints: list[bytes], cum_tokens: list[int], first: int) -> PreviousRequest:
        tokens = [cum_tokens[p] - (cum_tokens[p - 1] if p else 0) for p in range(first, len(cum_tokens))]
        return cls(first, len(hashes), hashes[first:], fingerprints[first:], tokens)

    def settle(self, hashes: list[bytes]) -> None:
        """Move `first` past positions whose content is the same after all (equal messages in new objects)."""
        same, limit = 0, min(len(self.hashes), len(hashes) - self.first)
        while same < limit and hashes[self.first + same] == self.hashes[same]:
            same += 1
        if same:
            self.first += same
            del self.hashes[:same], self.fingerprints[:same], self.tokens[:same]

    def rewrite(
        self, fingerprints: list[bytes], cum_tokens: list[int], read: int, established: int, warm: bool
    ) -> Rewrite | None:
        """The change this request made, `None` when it only grew. `read` is what it read from the cache,
        `established` what the previous one left cached, `warm` whether that entry was still alive."""
        if self.first >= self.length:
            return None
        first, now = self.first, fingerprints[self.first :]
        old = set(self.fingerprints)
        last_kept = next((i for i in range(len(now) - 1, -1, -1) if now[i] in old), None)
        kept = last_kept + 1 if last_kept is not None else max(0, len(now) - _NEW_PER_REQUEST)
        region = set(now[:kept])
        removed = sum(t for f, t in zip(self.fingerprints, self.tokens, strict=True) if f not in region)
        added = sum(_token_at(cum_tokens, first + i) for i in range(kept) if now[i] not in old)
        before_new = cum_tokens[first + kept - 1] if first + kept > 0 else 0
        rewritten = max(0, min(before_new, established) - read) if warm else 0
        return Rewrite(max(-1, first - FIRST_MESSAGE), max(0, removed - added), rewritten)


def _token_at(cum_tokens: list[int], position: int) -> int:
    return cum_tokens[position] - (cum_tokens[position - 1] if position else 0)
