"""Proof certificates (see :mod:`kvspec.proofs.certificate`)."""
