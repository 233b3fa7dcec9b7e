"""``kvspec audit``: check recorded engine event logs against the library properties,
the seed tutorial's acceptance checks, and a model (see docs/audit.md)."""
from kvspec.audit.logformat import AuditInputError, LogEvent
from kvspec.audit.mapping import Mapping, load_mapping
from kvspec.audit.run import AuditResult, Finding, audit_file, audit_stream

__all__ = ["AuditInputError", "AuditResult", "Finding", "LogEvent", "Mapping", "audit_file",
           "audit_stream", "load_mapping"]
