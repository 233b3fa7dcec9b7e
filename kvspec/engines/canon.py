"""Canonical representatives of states under request and page permutations.

Declared index spaces (ranks, handles, slots) are never permuted: a variable over
one is a row of scalars, and a two-dimensional variable over requests (pages) and
an index space is one per-request (per-page) run per index id, permuted with the
requests (pages) like any per-request (per-page) variable.

A permutation is a pair ``(rperm, pperm)`` of tuples mapping an old id to its new
id. :meth:`Canonicalizer.canon` returns a representative of a state's orbit and a
permutation that maps the state onto it. Requests are first ordered by a
permutation-invariant signature; only requests with equal signatures are tried
in every order, then page columns are sorted, so the representative is exact
(one per orbit) while usually trying a single request order.
"""
from __future__ import annotations

import itertools
import math
from typing import Any

from kvspec.lang.declare import SCALAR
from kvspec.lang.schema import Schema, State
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST, REQUEST

Perm = tuple[tuple[int, ...], tuple[int, ...]]

#: the most request orders tried for one state; beyond it the representative is
#: still a member of the orbit (sound) but may not be unique
MAX_TIE_ORDERS = 720


class Canonicalizer:
    def __init__(self, schema: Schema, requests: bool, pages: bool) -> None:
        self.R = schema.requests
        self.P = schema.pages
        self.req_sym = requests and self.R > 1
        self.page_sym = pages and self.P > 1
        self.width = schema.width
        #: images computed by :meth:`key` so far (the reduction's own work, for budgets)
        self.images = 0
        self.scalars: list[tuple[int, bool]] = []
        self.req_vars: list[tuple[int, bool]] = []
        self.page_vars: list[tuple[int, bool]] = []
        self.grid_vars: list[tuple[int, bool]] = []  # (page, request) arrays, row per page
        for v in schema.vars:
            is_ref = v.type.ref_dim == REQUEST
            if v.type.ref_dim == PAGE and self.page_sym:
                raise ValueError(f"variable {v.name} holds page ids")
            if v.dim == SCALAR:
                self.scalars.append((v.offset, is_ref))
            elif v.dim == REQUEST:
                self.req_vars.append((v.offset, is_ref))
            elif v.dim == PAGE_BY_REQUEST:
                self.grid_vars.append((v.offset, is_ref))
            elif v.dim == PAGE:
                self.page_vars.append((v.offset, is_ref))
            elif v.two_d and v.axes[0] in (REQUEST, PAGE):
                # stored with the symmetric axis fastest (see kvspec.lang.schema): each id
                # of the other, never permuted, axis is a contiguous per-request (per-page) run
                runs = self.req_vars if v.axes[0] == REQUEST else self.page_vars
                runs.extend((v.offset + v.slot(0, j), is_ref) for j in range(v.shape[1]))
            elif v.two_d and v.axes[1] in (REQUEST, PAGE):
                runs = self.req_vars if v.axes[1] == REQUEST else self.page_vars
                runs.extend((v.offset + v.slot(i, 0), is_ref) for i in range(v.shape[0]))
            elif all(a not in (REQUEST, PAGE) for a in v.axes):
                # over declared index spaces only: never permuted, each slot a scalar
                self.scalars.extend((v.offset + k, is_ref) for k in range(v.length))
            else:
                raise ValueError(f"variable {v.name}: unknown dimension {v.dim}")
        self.identity: Perm = (tuple(range(self.R)), tuple(range(self.P)))
        self._ref_cols = [j for j, (_, ref) in enumerate(self.page_vars) if ref]
        self._scalar_refs = any(ref for _, ref in self.scalars)

    @property
    def active(self) -> bool:
        return self.req_sym or self.page_sym

    # -- signatures ------------------------------------------------------------------
    def _columns(self, s: State) -> list[tuple[Any, ...]]:
        """Per page: the values of the per-page variables (request-order independent
        given the request ids they hold)."""
        P = self.P
        if not self.page_vars:
            return [()] * P
        return list(zip(*[s[off:off + P] for off, _ in self.page_vars]))

    def _full_columns(self, s: State) -> list[tuple[Any, ...]]:
        """Per page: its per-page values followed by its rows of the (page, request)
        arrays — everything a page permutation moves together."""
        cols = self._columns(s)
        if not self.grid_vars:
            return cols
        R = self.R
        return [cols[p] + tuple(x for off, _ in self.grid_vars
                                for x in s[off + p * R:off + p * R + R])
                for p in range(self.P)]

    def _request_orders(self, s: State) -> list[list[int]]:
        """Candidate orders: old request ids listed in their new positions. Requests
        are sorted by a signature that does not depend on ids; only requests with
        equal signatures are tried in every order."""
        R = self.R
        rows = [tuple(((-2 if s[off + r] == r else -3) if s[off + r] >= 0 else s[off + r])
                      if ref else s[off + r] for off, ref in self.req_vars) for r in range(R)]
        if len(set(rows)) == R and not self._scalar_refs:
            return [sorted(range(R), key=rows.__getitem__)]
        ref_cols = self._ref_cols
        per_req: list[list[Any]] = [[] for _ in range(R)]
        if ref_cols:
            for p, col in enumerate(self._columns(s)):
                named = {col[j] for j in ref_cols if col[j] >= 0}
                for r in named:
                    rel = tuple(((-2 if x == r else -3) if x >= 0 else x) if j in ref_cols else x
                                for j, x in enumerate(col))
                    per_req[r].append(rel if self.page_sym else (p, rel))
        sigs = []
        for r in range(R):
            row = rows[r]
            scal = tuple((-2 if s[off] == r else -3) if s[off] >= 0 else s[off]
                         for off, ref in self.scalars if ref)
            cols = per_req[r]
            cols.sort()
            sigs.append((row, tuple(cols), scal))
        order = sorted(range(R), key=sigs.__getitem__)
        groups: list[list[int]] = []
        for r in order:
            if groups and sigs[groups[-1][0]] == sigs[r]:
                groups[-1].append(r)
            else:
                groups.append([r])
        if len(groups) == R:
            return [order]
        total = 1
        for g in groups:
            total *= math.factorial(len(g))
        if total > MAX_TIE_ORDERS:
            return [order]
        orders = []
        for combo in itertools.product(*[list(itertools.permutations(g)) for g in groups]):
            orders.append([r for part in combo for r in part])
        return orders

    # -- images --------------------------------------------------------------------------
    def apply(self, s: State, perm: Perm) -> State:
        """The image of state ``s`` under ``perm``."""
        rperm, pperm = perm
        out = list(s)
        for off, ref in self.scalars:
            if ref and s[off] >= 0:
                out[off] = rperm[s[off]]
        for off, ref in self.req_vars:
            for r in range(self.R):
                x = s[off + r]
                out[off + rperm[r]] = rperm[x] if ref and x >= 0 else x
        for off, ref in self.page_vars:
            for p in range(self.P):
                x = s[off + p]
                out[off + pperm[p]] = rperm[x] if ref and x >= 0 else x
        R = self.R
        for off, ref in self.grid_vars:
            for p in range(self.P):
                for r in range(R):
                    x = s[off + p * R + r]
                    out[off + pperm[p] * R + rperm[r]] = rperm[x] if ref and x >= 0 else x
        return tuple(out)

    def _image(self, s: State, order: list[int], want_perm: bool = True
               ) -> tuple[State, Perm | None]:
        R, P = self.R, self.P
        if order == list(range(R)):
            rperm: tuple[int, ...] = tuple(order)
            img = s
        else:
            rp = [0] * R
            for new, old in enumerate(order):
                rp[old] = new
            rperm = tuple(rp)
            img = self.apply(s, (rperm, tuple(range(P))))
        if not self.page_sym:
            return img, ((rperm, tuple(range(P))) if want_perm else None)
        cols = self._full_columns(img)
        ranked = sorted(range(P), key=cols.__getitem__)
        out = list(img)
        if self.page_vars:
            for (off, _), values in zip(self.page_vars, zip(*[cols[i] for i in ranked])):
                out[off:off + P] = values
        R = self.R
        for off, _ in self.grid_vars:
            for new, old in enumerate(ranked):
                out[off + new * R:off + new * R + R] = img[off + old * R:off + old * R + R]
        if not want_perm:
            return tuple(out), None
        pperm = [0] * P
        for new, old in enumerate(ranked):
            pperm[old] = new
        return tuple(out), (rperm, tuple(pperm))

    def canon(self, s: State) -> tuple[State, Perm]:
        """The representative of ``s`` and a permutation mapping ``s`` onto it."""
        orders = self._request_orders(s) if self.req_sym else [list(range(self.R))]
        best: tuple[State, Perm | None] | None = None
        for order in orders:
            cand = self._image(s, order)
            if best is None or cand[0] < best[0]:
                best = cand
        assert best is not None and best[1] is not None
        return best[0], best[1]

    def key(self, s: State) -> State:
        """The representative of ``s`` (no permutation; the exploration hot path)."""
        if self.req_sym:
            orders = self._request_orders(s)
            self.images += len(orders)
            if len(orders) == 1:
                return self._image(s, orders[0], False)[0]
            return min(self._image(s, o, False)[0] for o in orders)
        self.images += 1
        return self._image(s, list(range(self.R)), False)[0]

    def orbit_size(self, s: State) -> int:
        """How many distinct states are symmetric images of ``s``."""
        rperms = itertools.permutations(range(self.R)) if self.req_sym else [tuple(range(self.R))]
        pid = tuple(range(self.P))
        forms = set()
        for rp in rperms:
            img = self.apply(s, (tuple(rp), pid))
            if self.page_sym:
                cols = sorted(self._full_columns(img))
                forms.add((self._non_page_part(img), tuple(cols)))
            else:
                forms.add(img)
        size = len(forms)
        if self.page_sym:
            cols = self._full_columns(s)
            mult: dict[Any, int] = {}
            for c in cols:
                mult[c] = mult.get(c, 0) + 1
            arrangements = math.factorial(self.P)
            for m in mult.values():
                arrangements //= math.factorial(m)
            size *= arrangements
        return size

    def _non_page_part(self, s: State) -> tuple[Any, ...]:
        page_slots = {off + p for off, _ in self.page_vars for p in range(self.P)}
        page_slots |= {off + k for off, _ in self.grid_vars for k in range(self.P * self.R)}
        return tuple(x for i, x in enumerate(s) if i not in page_slots)


def invert(perm: Perm) -> Perm:
    rperm, pperm = perm
    ri = [0] * len(rperm)
    for old, new in enumerate(rperm):
        ri[new] = old
    pi = [0] * len(pperm)
    for old, new in enumerate(pperm):
        pi[new] = old
    return tuple(ri), tuple(pi)


def compose(first: Perm, then: Perm) -> Perm:
    """The permutation ``then ∘ first`` (apply ``first``, then ``then``)."""
    return (tuple(then[0][x] for x in first[0]), tuple(then[1][x] for x in first[1]))
