"""Liveness: leak freedom, progress and deadlock under declared fairness, with lasso
counterexamples (explicit-state; see ``docs/liveness.md``)."""
from kvspec.liveness.check import check_liveness, declared_fairness
from kvspec.liveness.obligations import DEADLOCK, LIVENESS, PEF, RT, WEQ

__all__ = ["DEADLOCK", "LIVENESS", "PEF", "RT", "WEQ", "check_liveness", "declared_fairness"]
