"""Liveness: leak freedom, progress and deadlock under declared fairness, with lasso
counterexamples: exhaustive explicit-state search, and a bounded symbolic lasso search
(see ``docs/liveness.md``)."""
from kvspec.liveness.check import check_liveness, declared_fairness
from kvspec.liveness.obligations import DEADLOCK, LIVENESS, PEF, RT, WEQ
from kvspec.liveness.symbolic import check_liveness_bmc

__all__ = ["DEADLOCK", "LIVENESS", "PEF", "RT", "WEQ", "check_liveness", "check_liveness_bmc",
           "declared_fairness"]
