"""The host model the property audit compiles to run the library monitors on a log.

It has request and page id spaces and one action that is never enabled: the audit
never steps it. Compiled with every monitor variable stored
(``compile_model(..., prune_monitor=False)``), the system's generated
``_dispatch`` is the library's monitor, lowered exactly as for every model the
checker verifies; :mod:`kvspec.audit.properties` feeds it the log's events.
"""
from kvspec import Model, Request, Requests, Pages, action, require


class AuditMonitorHost(Model):
    requests = Requests(2)
    pages = Pages(2)

    @action
    def never(s, r: Request):
        require(False)
