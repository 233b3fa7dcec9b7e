"""``tomllib`` on every supported Python: the standard library's from 3.11, the
``tomli`` backport (a declared dependency there) on 3.10."""
from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["tomllib"]
