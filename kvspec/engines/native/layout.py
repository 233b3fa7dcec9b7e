"""Bit-packing of a state for the native search.

Every slot some action instance can write is stored in the bits its type needs
(``value - min`` in ``ceil(log2(max - min + 1))`` bits); a slot no instance writes
keeps its initial value in every reachable state and is not stored at all (its
value is a constant of the generated code). Slots never straddle a 64-bit word, so
a slot is one shift and one mask; the stored bytes of a state are the bytes its
words need, not whole words.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvspec.lang.types import ValueType


@dataclass(frozen=True)
class Slot:
    """Where one slot lives: ``const`` is its value when it is not stored."""

    lo: int
    bits: int
    word: int = 0
    shift: int = 0
    const: int | None = None

    @property
    def mask(self) -> int:
        return (1 << self.bits) - 1


@dataclass(frozen=True)
class Layout:
    slots: tuple[Slot, ...]
    words: int        # 64-bit words of an unpacked successor
    state_bytes: int  # bytes stored per state
    bits: int         # bits of information per state

    def pack(self, values: list[int]) -> list[int]:
        """The packed words of a state (every stored slot in its bits)."""
        out = [0] * self.words
        for s, v in zip(self.slots, values):
            if s.const is None:
                out[s.word] |= (int(v) - s.lo) << s.shift
        return out

    def unpack(self, words: list[int]) -> list[int]:
        return [s.const if s.const is not None else ((words[s.word] >> s.shift) & s.mask) + s.lo
                for s in self.slots]


def plan(types: list[ValueType], initial: list[int], written: set[int],
         keep: set[int] = frozenset()) -> Layout:  # type: ignore[assignment]
    """The layout for slots of ``types``: those in ``written`` (or ``keep``) stored, the
    others constant at their ``initial`` value."""
    slots: list[Slot] = []
    word, used, bits_total = 0, 0, 0
    for i, (t, init) in enumerate(zip(types, initial)):
        dom = [int(x) for x in t.domain()]
        lo, hi = min(dom), max(dom)
        bits = max(1, (hi - lo).bit_length())
        if i not in written and i not in keep:
            slots.append(Slot(lo, bits, const=int(init)))
            continue
        if bits > 64:
            raise ValueError(f"slot {i} needs {bits} bits")
        if used + bits > 64:
            word, used = word + 1, 0
        slots.append(Slot(lo, bits, word, used))
        used += bits
        bits_total += bits
    stored = [s for s in slots if s.const is None]
    if not stored:
        return Layout(tuple(slots), 1, 1, 0)
    last = max(s.word for s in stored)
    top = max(s.shift + s.bits for s in stored if s.word == last)
    return Layout(tuple(slots), last + 1, last * 8 + (top + 7) // 8, bits_total)
