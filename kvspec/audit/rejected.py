"""The ids of rejected requests whose audit state was retired: bounded memory, no
violation missed.

"A rejected request has no downstream event" must hold however late the event comes,
so the audit has to recognise a rejected id when it shows up again. Remembering every
rejected id exactly costs memory that grows with the log (about 150 bytes per rejected
request). :class:`RejectedIds` keeps it bounded instead:

* the **last** :data:`EXACT_IDS` rejected ids (retired, in retirement order) are kept
  exactly, with the line of their rejection: a later event of one of them is a definite
  violation, as before;
* older ones move into a fixed-size Bloom filter (:data:`FILTER_BITS` bits,
  :data:`FILTER_HASHES` hashes). A Bloom filter has **no false negatives**: an id that
  was put in is always found, so no violation is missed. It may say "maybe" for an id
  that was never rejected (with probability about ``(1 - e^(-k n / m))^k`` for ``n``
  ids in it: below 10^-9 up to a million ids, about 0.8 % at 6.7 million); findings that
  rest on it are therefore reported as **POSSIBLE** — labelled, never counted as
  violations, exit code 3 (unknown) when nothing definite was found.

Memory: at most :data:`EXACT_IDS` entries (a few MB) plus the filter (8 MiB, allocated
at the first eviction), whatever the length of the log.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import NamedTuple

#: rejected ids kept exactly (the most recently retired ones)
EXACT_IDS = 16_384
#: bits of the Bloom filter of the older ones (8 MiB)
FILTER_BITS = 1 << 26
FILTER_HASHES = 7

EXACT, POSSIBLE = "exact", "possible"


class Lookup(NamedTuple):
    how: str          # EXACT or POSSIBLE
    line: int | None  # the line of the rejection (EXACT only)


class RejectedIds:
    def __init__(self, exact: int = EXACT_IDS, filter_bits: int = FILTER_BITS,
                 hashes: int = FILTER_HASHES) -> None:
        if exact < 0 or filter_bits < 8 or hashes < 1:
            raise ValueError("exact >= 0, filter_bits >= 8 and hashes >= 1 needed")
        self.capacity = exact
        self.bits = filter_bits
        self.hashes = hashes
        self.exact: OrderedDict[str, int] = OrderedDict()
        self.filter: bytearray | None = None  # allocated at the first eviction
        self.filtered = 0  # ids moved into the filter

    def __len__(self) -> int:
        return len(self.exact) + self.filtered

    def add(self, rid: str, line: int) -> None:
        """Remember that ``rid`` was rejected at ``line`` (its state is being retired)."""
        exact = self.exact
        if rid in exact:
            exact.move_to_end(rid)
        exact[rid] = line
        while len(exact) > self.capacity:
            old, _ = exact.popitem(last=False)
            self._put(old)

    def lookup(self, rid: str) -> Lookup | None:
        """EXACT with the line of the rejection, POSSIBLE (the filter says maybe), or
        None: ``rid`` was certainly not a retired rejected request."""
        line = self.exact.get(rid)
        if line is not None:
            return Lookup(EXACT, line)
        if self.filter is not None and self._has(rid):
            return Lookup(POSSIBLE, None)
        return None

    # -- the filter --------------------------------------------------------------------------
    def _positions(self, rid: str) -> list[int]:
        digest = hashlib.blake2b(rid.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        h1 = int.from_bytes(digest[:8], "little")
        h2 = int.from_bytes(digest[8:], "little") | 1
        m = self.bits
        return [(h1 + i * h2) % m for i in range(self.hashes)]  # double hashing

    def _put(self, rid: str) -> None:
        if self.filter is None:
            self.filter = bytearray(self.bits // 8 + 1)
        f = self.filter
        for p in self._positions(rid):
            f[p >> 3] |= 1 << (p & 7)
        self.filtered += 1

    def _has(self, rid: str) -> bool:
        f = self.filter
        assert f is not None
        return all(f[p >> 3] & (1 << (p & 7)) for p in self._positions(rid))
