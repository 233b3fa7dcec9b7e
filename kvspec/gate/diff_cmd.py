"""The ``kvspec diff OLD NEW`` subcommand (registered by :func:`register`): what a
change to a lifecycle design changed — structure, verdicts, and the shortest
behaviour one design allows and the other does not (see :mod:`kvspec.gate.diff`).

``OLD`` and ``NEW`` are model files or ``git:REV:path`` (the file's content at a git
revision, read with ``git show`` in the repository that contains ``path``).

Exit codes: 0 no behavioural difference (exhaustive) and no verdict changed — a
structural change alone (a refactoring) is not a difference; 1 a distinguishing
behaviour or a verdict that changed between holding and violated; 2 usage or model
error; 3 no difference found but the search or a verification hit a limit.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import IO, Any

from kvspec.cli_args import output_file, picture_path, positive_int, size_spec
from kvspec.ctrl_c import stop_if_pressed
from kvspec.gate.diff import DesignDiff, diff_designs
from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.loader import LoadedModel, load_model, parse_sizes
from kvspec.lang.system import System, compile_model
from kvspec.report.wording import display_path, one_line
from kvspec.runner import ENGINES
from kvspec.verdict import EXIT_USAGE

__all__ = ["cmd_diff", "register", "resolve_source"]

GIT_PREFIX = "git:"
GIT_TIMEOUT_S = 60


def register(kit: Any) -> None:
    """Add the subcommand to the parser through ``kit`` (a :class:`kvspec.cli.ParserKit`)."""
    p = kit.command("diff", "compare two versions of a design: structure, verdicts and the "
                    "shortest behaviour only one of them allows", cmd_diff)
    p.add_argument("old", metavar="OLD", help="the old design: a model file or git:REV:path")
    p.add_argument("new", metavar="NEW", help="the new design: a model file or git:REV:path")
    p.add_argument("--size", action="append", type=size_spec, metavar="NAME=N[,NAME=N]",
                   help="override size parameters of both designs (each name must exist "
                        "in both)")
    p.add_argument("--model-class", help="the Model class to use in both files")
    p.add_argument("--old-class", help="the Model class of OLD (overrides --model-class)")
    p.add_argument("--new-class", help="the Model class of NEW (overrides --model-class)")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="engine for the verdict comparison (default auto)")
    p.add_argument("--max-states", type=positive_int, default=None, metavar="N",
                   help="explore at most N >= 1 state pairs (and N states per verification); "
                        "beyond it the answer is UNKNOWN, exit 3")
    kit.timeout_arg(p)
    p.add_argument("--no-verdicts", action="store_true",
                   help="skip verifying both designs and comparing their verdicts")
    p.add_argument("--json", action="store_true", help="print the kvspec-diff/1 JSON document")
    p.add_argument("--render", type=picture_path, metavar="OUT",
                   help="draw the distinguishing behaviour (.svg, .png, .pdf or .dot)")
    p.add_argument("-o", "--trace", metavar="FILE",
                   help="write the distinguishing behaviour as a kvspec-trace/1 document")


# -- sources --------------------------------------------------------------------------------

def resolve_source(spec: str, stack: contextlib.ExitStack) -> tuple[Path, str]:
    """The model file for ``spec`` and how to name it in messages. For
    ``git:REV:path`` the content at ``REV`` is written to a temporary file with the
    same base name (removed when ``stack`` closes)."""
    if not spec.startswith(GIT_PREFIX):
        return Path(spec), display_path(spec)
    rev, sep, path = spec[len(GIT_PREFIX):].partition(":")
    if not sep or not rev or not path:
        raise UsageError(f"{spec}: expected git:REV:path (e.g. git:HEAD~1:models/patched.py)")
    git = shutil.which("git")
    if git is None:
        raise UsageError(f"{spec}: git is not installed")
    target = Path.cwd() / path
    probe = target.parent
    while not probe.is_dir() and probe != probe.parent:
        probe = probe.parent
    top = _git(git, probe, ["rev-parse", "--show-toplevel"], spec)
    if top.returncode != 0:
        raise UsageError(f"{spec}: {display_path(probe)} is not inside a git repository")
    root = Path(top.stdout.decode("utf-8", "replace").strip()).resolve()
    try:
        rel = target.resolve().relative_to(root)
    except ValueError:
        raise UsageError(f"{spec}: {path} is outside the git repository {root}") from None
    kind = _git(git, root, ["cat-file", "-t", f"{rev}:{rel.as_posix()}"], spec)
    if kind.returncode == 0 and kind.stdout.strip() != b"blob":
        what = kind.stdout.decode("utf-8", "replace").strip()
        raise UsageError(f"{spec}: {rel.as_posix()} at {rev} is a "
                         f"{'directory' if what == 'tree' else what}, not a model file")
    shown = _git(git, root, ["show", f"{rev}:{rel.as_posix()}"], spec)
    if shown.returncode != 0:
        why = shown.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(f"{spec}: git show {rev}:{rel.as_posix()} failed: "
                         f"{why[0] if why else 'exit ' + str(shown.returncode)}")
    tmp = Path(stack.enter_context(_temporary_dir()))
    file = tmp / Path(path).name
    file.write_bytes(shown.stdout)
    return file, spec


@contextlib.contextmanager
def _temporary_dir() -> Any:
    import tempfile
    with tempfile.TemporaryDirectory(prefix="kvspec-diff-") as tmp:
        yield tmp


def _git(git: str, cwd: Path, argv: list[str], spec: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run([git, "-C", str(cwd), *argv], capture_output=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{spec}: cannot run git: {exc}") from None


def _relocated(exc: ModelError, file: Path, shown: str) -> ModelError:
    """A model error in a temporary copy names the ``git:REV:path`` it came from."""
    if exc.file is not None:
        try:
            same = Path(exc.file).resolve() == file.resolve()
        except OSError:
            same = False
        if same:
            exc.file = shown
        elif str(file) in exc.message:
            exc.message = exc.message.replace(str(file), shown)
    elif str(file) in exc.message:
        exc.message = exc.message.replace(str(file), shown)
    return exc


def _load(file: Path, shown: str, cls: str | None) -> LoadedModel:
    try:
        return load_model(file, cls)
    except ModelError as exc:
        raise _relocated(exc, file, shown) from None


def _compile(loaded: LoadedModel, sizes: dict[str, int], shown: str) -> System:
    try:
        return compile_model(loaded, sizes)
    except ModelError as exc:
        raise _relocated(exc, loaded.path, shown) from None
    except UsageError as exc:
        raise UsageError(str(exc).replace(str(loaded.path), shown)) from None


def _sizes_for(old: LoadedModel, new: LoadedModel, names: tuple[str, str],
               overrides: dict[str, int], err: IO[str]) -> tuple[dict[str, int], dict[str, int]]:
    """The size overrides of each design: the command line's (every name must exist in
    both), and for a size both declare with different defaults, NEW's default."""
    known_old = {s.name: s.default for s in old.decl.sizes if s.derived is None}
    known_new = {s.name: s.default for s in new.decl.sizes if s.derived is None}
    for key in overrides:
        for which, shown, known in (("OLD", names[0], known_old), ("NEW", names[1], known_new)):
            if key not in known:
                raise UsageError(f"--size {key}: {which} ({shown}) has no size parameter "
                                 f"{key!r} (it has: {', '.join(known) or 'none'})")
    so, sn = dict(overrides), dict(overrides)
    for key, default in known_new.items():
        if key in known_old and key not in overrides and known_old[key] != default:
            so[key] = default
            err.write(f"kvspec: note: size {key} is {known_old[key]} in OLD and {default} in "
                      f"NEW; both are compiled with {key}={default} (choose with --size)\n")
    return so, sn


# -- the command ----------------------------------------------------------------------------

def cmd_diff(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    output_file(args.render, "--render")
    output_file(args.trace, "-o")
    overrides = parse_sizes(args.size)
    with contextlib.ExitStack() as stack:
        old_file, old_name = resolve_source(args.old, stack)
        new_file, new_name = resolve_source(args.new, stack)
        old_loaded = _load(old_file, old_name, args.old_class or args.model_class)
        new_loaded = _load(new_file, new_name, args.new_class or args.model_class)
        so, sn = _sizes_for(old_loaded, new_loaded, (old_name, new_name), overrides, err)
        old = _compile(old_loaded, so, old_name)
        new = _compile(new_loaded, sn, new_name)
        shown = {str(old_loaded.path): old_name, str(new_loaded.path): new_name}
        diff = diff_designs(old, new, max_states=args.max_states, timeout=args.timeout,
                            verdicts=not args.no_verdicts, engine=args.engine,
                            old_name=old_name, new_name=new_name,
                            warn=lambda m: _warn(err, m))
        trace_doc = _trace_doc(diff, shown)
        stop_if_pressed(args)
        if args.json:
            doc = diff.to_json()
            if doc["behaviour"]["distinction"] is not None:
                doc["behaviour"]["distinction"]["trace"] = trace_doc
            json.dump(doc, out, indent=2)
            out.write("\n")
        else:
            out.write(diff.to_text())
        code = _write_outputs(args, diff, trace_doc, err)
    return code if code else diff.exit_code


def _warn(err: IO[str], message: str) -> None:
    err.write(f"kvspec: warning: {message}\n")


def _trace_doc(diff: DesignDiff, shown: dict[str, str]) -> dict[str, Any] | None:
    d = diff.distinction
    if d is None or d.trace is None:
        return None
    doc = d.trace.to_json()
    model = doc.get("model") or {}
    model["file"] = shown.get(str(model.get("file")), model.get("file"))
    return doc


def _write_outputs(args: argparse.Namespace, diff: DesignDiff, doc: dict[str, Any] | None,
                   err: IO[str]) -> int:
    """Write ``-o`` and ``--render``; 0, or 2 when a file cannot be written."""
    if doc is None:
        if args.trace or args.render:
            err.write("kvspec: no distinguishing behaviour: nothing to write or draw\n")
        return 0
    if args.trace:
        try:
            Path(args.trace).write_text(json.dumps(doc, indent=2) + "\n")
        except OSError as exc:
            err.write(f"kvspec: error: cannot write {args.trace}: {exc.strerror or exc}\n")
            return EXIT_USAGE
        if not args.json:
            err.write(f"kvspec: distinguishing behaviour written to {args.trace}\n")
    if args.render:
        from kvspec.render.style import RenderError
        from kvspec.render.trace_graph import TraceFormatError, render_trace
        try:
            path = render_trace(doc, Path(args.render))
        except (RenderError, TraceFormatError, OSError) as exc:
            err.write(f"kvspec: error: cannot render: {one_line(str(exc))}\n")
            return EXIT_USAGE
        if not args.json:
            err.write(f"kvspec: picture of the distinguishing behaviour written to {path}\n")
    return 0
