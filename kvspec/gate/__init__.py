"""Regression gating of lifecycle design changes: configuration, ``kvspec check``,
``kvspec diff`` and their report formats."""
