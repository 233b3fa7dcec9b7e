"""Random valid models over declared index spaces, for differential testing.

Every model has requests, two declared index spaces (``ranks = Ranks(n)``,
``slots = Slots(2)``) and state over them in every shape the language has:
``requests.by(ranks)`` (a symmetric outer axis), ``ranks.by(requests)`` (a
symmetric inner axis), ``slots.by(ranks)`` (no symmetric axis), per-rank and
per-slot arrays holding request ids, a scalar holding an optional rank. Actions
take ``Request``, ``ranks.id`` and ``slots.id`` parameters; guards and updates are
drawn from element reads and writes (``s.g[r, k]``, with a constant rank too),
lines (``s.g[r, :]``, ``s.g[:, k]``, ``s.g[r]``) with every reduction (``.any()``,
``.all()``, ``.count()``, ``.count(v)``, ``.min()``, ``.max()``, ``any()``/``sum()``), reductions
of a whole two-dimensional mask along one axis (``m.any(axis=s.ranks)``) and masked
stores with them, line writes
(``s.g[r, :] = v``), loops over requests and ranks, and generator folds.
Request ids stay opaque in most models, so symmetry reduction is exercised with
the extra axes carried along.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

HEADER = '''\
import enum
from kvspec import (Int, Model, Ranks, Request, Requests, Slots, action, emit, invariant,
                    require, var)


class Gen(Model):
    requests = Requests(2)
    ranks = Ranks({ranks})
    slots = Slots(2)
    st = requests.var(Int(0, 2), init=0)
    g = requests.by(ranks).var(Int(0, 2), init={g_init})
    q = ranks.by(requests).var(bool, init=False)
    w = slots.by(ranks).var(bool, init={w_init})
    h = ranks.var(requests.optional, init=None)
    owner = slots.var(requests.optional, init=None)
    cur = var(ranks.optional, init=None)
'''


@dataclass
class IndexModel:
    source: str
    class_name: str = "Gen"


class _Gen:
    def __init__(self, rng: random.Random, ranks: int) -> None:
        self.rng = rng
        self.ranks = ranks

    def pick(self, *xs: str) -> str:
        return self.rng.choice(xs)

    def val(self) -> str:
        return str(self.rng.randint(0, 2))

    def atom(self, params: set[str]) -> str:
        """A bool expression over the state, using the action's parameters."""
        c = []
        if "r" in params:
            c += [f"s.st[r] == {self.val()}", f"s.st[r] != {self.val()}",
                  f"(s.g[r, :] == {self.val()}).any()", "(s.g[r] >= 1).all()",
                  f"(s.g[r, :] == {self.val()}).count() <= 1", f"s.g[r].count({self.val()}) >= 1",
                  "s.q[:, r].any()", "not s.q[:, r].all()", "(s.owner == r).count() < 2",
                  "any(s.h[k3] == r for k3 in s.ranks)",
                  f"s.g[r, {self.rng.randrange(self.ranks)}] == {self.val()}",
                  f"s.g[r, :].min() <= {self.val()}", f"s.g[r].max() >= {self.val()}"]
        if "k" in params:
            c += ["s.h[k] is None", "s.h[k] is not None", "s.cur == k", "s.cur != k",
                  "s.q[k].any()", "(s.q[k, :] == False).count() >= 1", "s.w[:, k].any()", f"s.g[:, k].max() == {self.val()}",
                  f"(s.g[:, k] == {self.val()}).count() == 0", "sum(s.g[:, k] >= 1) <= 1"]
        if "r" in params and "k" in params:
            c += [f"s.g[r, k] == {self.val()}", f"s.g[r, k] < {self.val()}", "s.q[k, r]",
                  "not s.q[k, r]", "s.h[k] == r", "s.h[k] != r"]
        if "j" in params:
            c += ["s.owner[j] is None", "s.owner[j] is not None", "s.w[j].any()",
                  "not s.w[j, :].all()", "s.w[j, 0]"]
        if "j" in params and "k" in params:
            c += ["s.w[j, k]", "not s.w[j, k]"]
        if "j" in params and "r" in params:
            c += ["s.owner[j] == r"]
        c += ["s.cur is None", "s.cur is not None", "(s.st == 2).count() <= 1",
              f"s.g.min() == {self.val()}", f"s.st.max() <= {self.val()}",
              f"(s.g >= {self.val()}).all(axis=s.ranks).count() <= 1",
              "s.q.any(axis=s.requests).count() >= 1", "(~s.w).all(axis=s.ranks).any()",
              f"((s.g == {self.val()}) | ~(s.g >= 1)).any(axis=s.requests).all()",
              "all((s.g[r3, :] >= 1).any() or s.st[r3] == 0 for r3 in s.requests)"]
        return self.rng.choice(c)

    def update(self, params: set[str]) -> list[str]:
        c: list[list[str]] = []
        v = self.val()
        if "r" in params:
            c += [[f"s.st[r] = {v}"], [f"s.g[r, :] = {v}"], [f"s.g[r] = {v}"],
                  ["s.q[:, r] = False"], [f"s.g[r, {self.rng.randrange(self.ranks)}] = {v}"],
                  ["for k2 in s.ranks:", f"    if s.g[r, k2] == {v}:",
                   f"        s.g[r, k2] = {self.val()}"],
                  ["for k2 in s.ranks:", "    s.q[k2, r] = s.g[r, k2] >= 1"],
                  ["s.st[r] = min(2, s.g[r].count(1) + s.st[r])"], ["s.st[r] = s.g[r, :].max()"]]
        if "k" in params:
            c += [["s.cur = k"], ["s.h[k] = None"], [f"s.g[:, k] = {v}"], ["s.w[:, k] = True"],
                  ["for r2 in s.requests:", "    s.g[r2, k] = min(2, s.g[r2, k] + 1)"],
                  ["s.q[k, :] = False"]]
        if "r" in params and "k" in params:
            c += [[f"s.g[r, k] = {v}"], ["s.q[k, r] = not s.q[k, r]"], ["s.h[k] = r"],
                  ["s.g[r, k] = (s.g[r, k] + 1) % 3"], ["emit.admit(r)"]]
        if "j" in params:
            c += [["s.owner[j] = None"], ["s.w[j, :] = False"], ["s.w[j, 0] = not s.w[j, 0]"]]
        if "j" in params and "k" in params:
            c += [["s.w[j, k] = True"]]
        if "j" in params and "r" in params:
            c += [["s.owner[j] = r"]]
        c += [["s.cur = None"], [f"s.st[(s.g == 2).all(axis=s.ranks)] = {v}"],
              ["s.h[s.q.any(axis=s.requests)] = None"]]
        return self.rng.choice(c)

    def action(self, n: int) -> list[str]:
        params = self.rng.choice([("r",), ("r", "k"), ("k",), ("r", "j"), ("j", "k"),
                                  ("r", "k", "j")])
        ann = {"r": "r: Request", "k": "k: ranks.id", "j": "j: slots.id"}
        ps = set(params)
        lines = ["    @action", f"    def a{n}(s, {', '.join(ann[p] for p in params)}):"]
        for _ in range(self.rng.choice([0, 1, 1, 2])):
            lines.append(f"        require({self.atom(ps)})")
        for _ in range(self.rng.randint(1, 3)):
            if self.rng.random() < 0.25:
                lines.append(f"        if {self.atom(ps)}:")
                lines += ["            " + x for x in self.update(ps)]
            else:
                lines += ["        " + x for x in self.update(ps)]
        return lines

    def invariant(self, n: int) -> list[str]:
        body = self.atom({"r"})
        quant = self.pick("all", "any")
        return ["    @invariant", f"    def inv{n}(s) -> bool:",
                f"        return {quant}({body} for r in s.requests) or s.cur == 0"]


def random_index_model(seed: int) -> IndexModel:
    """A random model over index spaces (the same one for the same seed)."""
    rng = random.Random(seed)
    ranks = rng.choice([1, 2, 2, 3])
    gen = _Gen(rng, ranks)
    g_init = rng.choice(["0", "1", "lambda sz: [[k % 2 for k in range(sz['ranks'])]] * 2"])
    w_init = rng.choice(["False", "lambda sz: [[k == 0 for k in range(sz['ranks'])]] * 2"])
    lines = HEADER.format(ranks=ranks, g_init=g_init, w_init=w_init).splitlines()
    for n in range(rng.randint(3, 6)):
        lines.append("")
        lines += gen.action(n)
    for n in range(rng.randint(1, 2)):
        lines.append("")
        lines += gen.invariant(n)
    return IndexModel("\n".join(lines) + "\n")
