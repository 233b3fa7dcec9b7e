"""A small KV-transfer lifecycle design, gated by ``kvspec check`` (kvspec's test fixture).

``transfer.py`` is the current design; ``legacy.py`` the design before the abort path
was fixed, kept with its violations pinned in ``pyproject.toml``. ``versions/`` holds
the variants the tests switch ``transfer.py`` to: ``good.py`` (the current design),
``regressed.py`` (abort frees the page while the write can still land) and
``dead_abort.py`` (abort can never fire).
"""
