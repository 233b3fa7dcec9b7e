"""Proofs for every number of requests and pages (requests and pages as uninterpreted
sorts): the parametric reading of a model (:mod:`.values`, :mod:`.encode`, :mod:`.model`,
:mod:`.spaces` for declared index spaces), the
generalisation of size-specific invariants (:mod:`.generalise`), the quantified
induction check (:mod:`.induction`), the certificate text (:mod:`.smtlib`) and the
``all-sizes`` engine (:mod:`.engine`)."""
