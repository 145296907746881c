"""The Python code blocks of the docs, found and checked (tests/docs/test_code_blocks.py says the rules).

`collect` reads a Markdown file the way the site build does: pymdownx.snippets includes
(``--8<-- "path"``) are expanded with the site's own settings, a top-level include of another
Markdown file is followed (its blocks keep their own file and line), and fenced blocks (backticks
or tildes, indented too, as in an admonition) are kept when their language is Python. `check`
runs one block: it executes it as a fresh module, parses the DAGs it defines as Airflow's
DagBag would, and runs them with ``dag.test()`` on the embedded cluster a `Clusters` gives.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import functools
import importlib.util
import json
import os
import re
import sys
import traceback
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
# Languages Pygments reads as Python source, and as an interactive session.
MODULE_LANGUAGES = frozenset({"python", "py", "python3", "py3"})
SESSION_LANGUAGES = frozenset({"pycon"})
# Modules of the `train` extra: a block whose replicas import them runs only where it is installed.
TRAIN_EXTRA = ("torch", "sklearn")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*?)[ \t]*$")
_SNIPPET_LINE = re.compile(r"^[ \t]*-+8<-+[ \t]+(?P<quote>['\"])(?P<path>.+?)(?P=quote)[ \t]*$")
_SNIPPET_BLOCK_MARKER = re.compile(r"^[ \t]*-+8<-+[ \t]*$")
_DIRECTIVE = re.compile(r"^[ \t]*<!--[ \t]*docs-test:(?P<body>.*?)-->[ \t]*$")
_COMMENT = re.compile(r"^[ \t]*<!--.*-->[ \t]*$")


class _SiteLoader(yaml.SafeLoader):
    """mkdocs.yml as data: a ``!!python/name:...`` tag some settings use reads as its text."""


_SiteLoader.add_multi_constructor("", lambda loader, suffix, node: getattr(node, "value", None))


@functools.cache
def site_config(repo: Path = REPO) -> dict[str, Any]:
    config: dict[str, Any] = yaml.load((repo / "mkdocs.yml").read_text(encoding="utf-8"), _SiteLoader)
    return config


def snippets_config(repo: Path = REPO) -> dict[str, Any]:
    """The site's pymdownx.snippets settings (mkdocs.yml), with base paths made absolute."""
    for extension in site_config(repo).get("markdown_extensions") or []:
        if isinstance(extension, dict) and "pymdownx.snippets" in extension:
            settings = dict(extension["pymdownx.snippets"] or {})
            break
    else:
        settings = {}
    bases = settings.get("base_path", ["."])
    settings["base_path"] = [str(repo / base) for base in ([bases] if isinstance(bases, str) else bases)]
    return settings


def doc_files(repo: Path = REPO) -> list[Path]:
    """README.md and every page of the site (mkdocs.yml's docs_dir), in a stable order."""
    docs = repo / site_config(repo).get("docs_dir", "docs")
    return [repo / "README.md", *sorted(docs.rglob("*.md"))]


def relative(path: Path, repo: Path = REPO) -> str:
    try:
        return path.resolve().relative_to(repo).as_posix()
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Directive:
    """What a ``<!-- docs-test: ... -->`` comment right before a fence asks for."""

    parse_only: str | None = None  # the reason a DAG block is not run with dag.test()
    compile_only: str | None = None  # the reason a block is not executed at all
    keeps_job: str | None = None  # the reason a successful run leaves a job (deleted after the test)
    run_conf: Mapping[str, Any] | None = None  # dag.test(run_conf=...)


@dataclass(frozen=True)
class Include:
    """One ``--8<-- "path"`` line of a fence: the file, and the lines or section it selects."""

    target: str
    path: Path | None  # None: the file does not exist

    @property
    def file(self) -> str:
        return _split_snippet_path(self.target)[0]


@dataclass
class Block:
    path: Path  # the Markdown file
    line: int  # the opening fence's line (1-based)
    language: str
    source: str  # as the site shows it: dedented, includes expanded
    body_line: int | None  # the Markdown line of the first body line, if the body is literal text
    includes: tuple[Include, ...] = ()
    directive: Directive = field(default_factory=Directive)
    problems: list[str] = field(default_factory=list)  # what makes the block fail before it runs
    only_includes: bool = False  # the body is include lines only: the site shows those files

    @property
    def id(self) -> str:
        return f"{relative(self.path)}:{self.line}"

    @property
    def is_session(self) -> bool:
        return self.language in SESSION_LANGUAGES or (
            self.language in MODULE_LANGUAGES and self.source.lstrip().startswith(">>>")
        )

    @property
    def slug(self) -> str:
        return re.sub(r"\W", "_", relative(self.path).replace(".md", "")) + f"_{self.line}"


@dataclass
class Collection:
    blocks: list[Block] = field(default_factory=list)
    # ``docs-test`` comments that no Python fence follows, and ones that do not parse: file:line.
    stray: list[str] = field(default_factory=list)


def _split_snippet_path(target: str) -> tuple[str, str | None, str | None]:
    """``path``, its line ranges (``:1:5``) and its section (``:name``), as pymdownx splits them."""
    groups = _snippet_preprocessor().split_path(target)
    if groups is None:
        return target, None, None
    path, lines, section = groups
    return str(path), lines, section


@functools.cache
def _snippet_preprocessor() -> Any:
    import markdown

    md = markdown.Markdown(extensions=["pymdownx.snippets"], extension_configs={"pymdownx.snippets": {}})
    return md.preprocessors["snippet"]


def expand_snippets(lines: list[str], repo: Path = REPO) -> list[str]:
    """Lines with their includes expanded by pymdownx.snippets itself, with the site's settings."""
    import markdown

    md = markdown.Markdown(
        extensions=["pymdownx.snippets"], extension_configs={"pymdownx.snippets": snippets_config(repo)}
    )
    expanded: list[str] = md.preprocessors["snippet"].run(list(lines))
    return expanded


_REASONED = {"parse-only": "parse_only", "compile-only": "compile_only", "keeps-job": "keeps_job"}


def parse_directive(text: str) -> Directive:
    """``parse-only: <reason>``, ``compile-only: <reason>``, ``keeps-job: <reason>`` or
    ``run-conf: <JSON object>``."""
    key, _, value = text.strip().partition(":")
    key, value = key.strip(), value.strip()
    if key in _REASONED:
        if not value:
            raise ValueError(f"'{key}' needs a reason: <!-- docs-test: {key}: why -->")
        return Directive(**{_REASONED[key]: value})
    if key == "run-conf":
        conf = json.loads(value)
        if not isinstance(conf, dict):
            raise ValueError(f"run-conf must be a JSON object, not {value!r}")
        return Directive(run_conf=conf)
    raise ValueError(f"unknown docs-test directive {key!r} ({', '.join(_REASONED)}, run-conf)")


def _merge(first: Directive, second: Directive) -> Directive:
    return Directive(
        parse_only=second.parse_only or first.parse_only,
        compile_only=second.compile_only or first.compile_only,
        keeps_job=second.keeps_job or first.keeps_job,
        run_conf=second.run_conf if second.run_conf is not None else first.run_conf,
    )


def _snippet_targets(body: list[str]) -> tuple[list[str], bool]:
    """The include targets among a fence's body lines; True if the body is nothing else."""
    targets: list[str] = []
    only = True
    in_block = False
    for line in body:
        if _SNIPPET_BLOCK_MARKER.match(line):
            in_block = not in_block
            continue
        if in_block:
            if line.strip():
                targets.append(line.strip())
            continue
        if match := _SNIPPET_LINE.match(line):
            targets.append(match.group("path"))
        elif line.strip():
            only = False
    return targets, only and bool(targets)


def _fence_at(lines: list[str], index: int) -> tuple[int, str, list[str]] | None:
    """The fence opening at ``lines[index]``: the index of its closing line, its language and its
    body (dedented by the fence's indentation), or None."""
    fence = _FENCE.match(lines[index])
    if fence is None:
        return None
    indent, marker, info = fence.group("indent"), fence.group("fence"), fence.group("info")
    if marker[0] == "`" and "`" in info:  # not a fence: inline code at the start of a line
        return None
    closing = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
    end = index + 1
    while end < len(lines) and not closing.match(lines[end]):
        end += 1
    body = [_dedent_line(text, len(indent)) for text in lines[index + 1 : end]]
    language = info.lstrip("{").lstrip(".").split(" ")[0].split("}")[0].lower() if info else ""
    return end, language, body


def collect(path: Path, repo: Path = REPO, _seen: frozenset[Path] = frozenset()) -> Collection:
    """The Python blocks of one Markdown file (and of the Markdown files it includes)."""
    path = path.resolve()
    found = Collection()
    lines = path.read_text(encoding="utf-8").split("\n")
    pending: Directive | None = None  # from the docs-test comments since the last text or fence
    pending_line = 0
    index = 0
    while index < len(lines):
        line, number = lines[index], index + 1
        if match := _DIRECTIVE.match(line):
            pending_line = pending_line if pending is not None else number
            try:
                pending = _merge(pending or Directive(), parse_directive(match.group("body")))
            except ValueError as error:
                found.stray.append(f"{relative(path)}:{number}: {error}")
        elif (snippet := _SNIPPET_LINE.match(line)) and snippet.group("path").endswith(".md"):
            # A page that includes another Markdown file shows that file's blocks.
            included = (repo / _split_snippet_path(snippet.group("path"))[0]).resolve()
            if included.is_file() and included not in _seen:
                inner = collect(included, repo, _seen | {path})
                found.blocks.extend(inner.blocks)
                found.stray.extend(inner.stray)
        elif fence := _fence_at(lines, index):
            end, language, body = fence
            if language in MODULE_LANGUAGES | SESSION_LANGUAGES:
                found.blocks.append(_block(path, number, language, body, pending or Directive(), repo))
            elif pending is not None:
                found.stray.append(f"{relative(path)}:{pending_line}")
            pending = None
            index = end
        elif line.strip() and not _COMMENT.match(line) and pending is not None:
            found.stray.append(f"{relative(path)}:{pending_line}")
            pending = None
        index += 1
    if pending is not None:
        found.stray.append(f"{relative(path)}:{pending_line}")
    return found


def _dedent_line(text: str, width: int) -> str:
    removable = len(text) - len(text.lstrip(" \t"))
    return text[min(width, removable) :]


def _block(
    path: Path, number: int, language: str, body: list[str], directive: Directive, repo: Path
) -> Block:
    targets, only_includes = _snippet_targets(body)
    problems: list[str] = []
    includes = []
    for target in targets:
        file = (repo / _split_snippet_path(target)[0]).resolve()
        includes.append(Include(target=target, path=file if file.is_file() else None))
    if targets:
        try:
            expanded = expand_snippets(body, repo)
        except Exception as error:  # pymdownx's SnippetMissingError, a bad section...
            problems.append(f"an include does not resolve: {type(error).__name__}: {error}")
            expanded = body
    else:
        expanded = body
    return Block(
        path=path,
        line=number,
        language=language,
        source="\n".join(expanded).rstrip() + "\n",
        body_line=None if targets else number + 1,
        includes=tuple(includes),
        directive=directive,
        problems=problems,
        only_includes=only_includes,
    )


def collect_all(files: list[Path] | None = None, repo: Path = REPO) -> Collection:
    everything = Collection()
    seen: set[tuple[Path, int]] = set()
    for path in files if files is not None else doc_files(repo):
        if not path.is_file():
            continue
        found = collect(path, repo)
        for block in found.blocks:  # a file included by two pages counts once
            if (block.path, block.line) not in seen:
                seen.add((block.path, block.line))
                everything.blocks.append(block)
        everything.stray.extend(found.stray)
    return everything


# --- running a block --------------------------------------------------------------------------


class BlockFailed(AssertionError):
    """A block that raised, did not parse as a DAG file, or whose DAG run did not succeed."""


@dataclass
class Outcome:
    """What `check` did with a block, for the tests to assert on."""

    dag_ids: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)  # DAG ids run with dag.test()
    skipped_run: str | None = None  # why the DAGs were not run
    executed: bool = False


@dataclass
class Clusters:
    """Embedded clusters by runtime (``script``, ``process``), started only when a DAG needs one."""

    get: Callable[[str], Any]  # runtime -> a started gang_sim SimCluster


def _failure(block: Block, what: str, error: BaseException | None = None) -> BlockFailed:
    detail = ""
    if error is not None:
        # The traceback from the block's own frames on: the ones of this module say nothing.
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        detail = "\n" + "".join(traceback.format_exception(type(error), error, tb)).rstrip()
    return BlockFailed(f"{block.id}: {what}{detail}")


@contextlib.contextmanager
def isolated(workdir: Path) -> Iterator[None]:
    """Environment, sys.path and the working directory as they were, whatever a block changes."""
    environ = dict(os.environ)
    path = list(sys.path)
    before = Path.cwd()
    os.chdir(workdir)
    try:
        yield
    finally:
        os.chdir(before)
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(environ)


def execute(source: str, filename: str, name: str) -> tuple[types.ModuleType, list[Any]]:
    """Run ``source`` as a new module ``name``; return it and the DAGs it defined.

    The DAGs are the ones Airflow's DAG importer keeps: ``DAG`` objects at module level and the
    ones a ``with DAG(...)`` block or a called ``@dag`` function registered while it ran.
    """
    from airflow.sdk import DAG
    from airflow.sdk.definitions._internal.contextmanager import DagContext

    module = types.ModuleType(name)
    module.__file__ = filename
    code = compile(source, filename, "exec", dont_inherit=True)
    sys.modules[name] = module
    DagContext.autoregistered_dags.clear()
    DagContext.current_autoregister_module_name = name
    try:
        exec(code, module.__dict__)
        dags = {id(value): value for value in module.__dict__.values() if isinstance(value, DAG)}
        dags.update({id(dag): dag for dag, _ in DagContext.autoregistered_dags})
    finally:
        DagContext.current_autoregister_module_name = None
        DagContext.autoregistered_dags.clear()
        sys.modules.pop(name, None)
    return module, list(dags.values())


def aligned(block: Block) -> tuple[str, str]:
    """The code and the file name to compile it under, so tracebacks show Markdown lines."""
    if block.body_line is not None:  # blank lines first: line N of the code is line N of the page
        return "\n" * (block.body_line - 1) + block.source, str(block.path)
    return block.source, f"{block.id} (includes expanded)"


def parse_as_airflow(file: Path, bundle: Path) -> Any:
    """A DagBag over one file, as the DAG processor makes it (Airflow's safe-mode heuristic too)."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(file), bundle_path=bundle, bundle_name="dags-folder")


def _check_dagbag(block: Block, bag: Any, expected: set[str] | None, where: str) -> list[Any]:
    if bag.import_errors:
        errors = "\n".join(f"{path}:\n{error}" for path, error in bag.import_errors.items())
        raise _failure(block, f"{where} does not parse as a DAG file:\n{errors}")
    dags = list(bag.dags.values())
    found = {dag.dag_id for dag in dags}
    if not dags:
        raise _failure(block, f"Airflow finds no DAG in {where} (its file must mention 'airflow' and 'dag')")
    if expected is not None and found != expected:
        raise _failure(
            block, f"Airflow finds the DAGs {sorted(found)} in {where}, running it made {sorted(expected)}"
        )
    empty = sorted(dag.dag_id for dag in dags if not dag.tasks)
    if empty:
        raise _failure(block, f"DAGs without a task in {where}: {empty}")
    return dags


def runtime_of(dag: Any) -> str:
    """``process`` for a DAG with a ``@task.pytorchjob``-style task (its function really runs)."""
    from airflow_gang.decorators.replica_task import ReplicaFunctionOperator

    for task in dag.tasks:
        kind = getattr(task, "operator_class", type(task))
        if isinstance(kind, type) and issubclass(kind, ReplicaFunctionOperator):
            return "process"
    return "script"


def _missing_train_modules(source: str) -> list[str]:
    """Modules of the ``train`` extra the block imports (anywhere) that are not installed."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    return sorted(name for name in TRAIN_EXTRA if name in imported and importlib.util.find_spec(name) is None)


def _task_states(dag_run: Any) -> dict[str, str | None]:
    return {
        (ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"): (
            str(ti.state) if ti.state else None
        )
        for ti in dag_run.get_task_instances()
    }


def check(block: Block, *, workdir: Path, dags_folder: Path, clusters: Clusters | None) -> Outcome:
    """Execute a block; parse its DAGs as Airflow would and, unless told not to, dag.test() them.

    Raises `BlockFailed` (``file:line: what``, with the traceback) for anything that goes wrong.
    ``clusters`` None parses DAGs without running them.
    """
    outcome = Outcome()
    if block.problems:
        raise _failure(block, "; ".join(block.problems))
    if block.only_includes:
        return _check_includes(block, workdir=workdir, dags_folder=dags_folder)
    code, filename = aligned(block)
    if block.is_session:
        _run_session(block, code, filename, workdir)
        outcome.executed = True
        return outcome
    try:
        compile(code, filename, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise _failure(block, "is not valid Python", error) from None
    if block.directive.compile_only:
        outcome.skipped_run = block.directive.compile_only
        return outcome
    with isolated(workdir):
        try:
            _, dags = execute(code, filename, f"docs_block_{block.slug}")
        except Exception as error:
            raise _failure(block, f"raised {type(error).__name__}", error) from None
        outcome.executed = True
        if not dags:
            return outcome
        outcome.dag_ids = sorted(dag.dag_id for dag in dags)
        _run_dags(block, code, set(outcome.dag_ids), outcome, dags_folder=dags_folder, clusters=clusters)
    return outcome


def _run_dags(
    block: Block,
    code: str,
    expected: set[str],
    outcome: Outcome,
    *,
    dags_folder: Path,
    clusters: Clusters | None,
) -> None:
    # The file dag.test() needs in the DAGs folder (Airflow 3.3 syncs it to the metadata DB first),
    # with the block's lines where the page has them; it goes afterwards, as the e2e tests' files do.
    file = dags_folder / f"docs_{block.slug}.py"
    # (Line 1 is blank in an aligned block; the comment names neither of the words Airflow's
    # safe-mode heuristic looks for.)
    header = "# A code block of the docs (its file name says which), run by tests/docs/test_code_blocks.py"
    file.write_text(header + code if code.startswith("\n") else code, encoding="utf-8")
    try:
        dags = _check_dagbag(block, parse_as_airflow(file, dags_folder), expected, "the block")
        if block.directive.parse_only:
            outcome.skipped_run = block.directive.parse_only
            return
        missing = _missing_train_modules(block.source)
        if missing:
            outcome.skipped_run = f"needs the [train] extra: {', '.join(missing)} not installed"
            return
        if clusters is None:
            outcome.skipped_run = "no cluster"
            return
        for dag in dags:
            _dag_test(block, dag, clusters)
            outcome.ran.append(dag.dag_id)
    finally:
        file.unlink(missing_ok=True)


def _dag_test(block: Block, dag: Any, clusters: Clusters) -> None:
    runtime = runtime_of(dag)
    cluster = clusters.get(runtime)
    os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": cluster.kubeconfig_path}}
    )
    if runtime == "process":  # the replicas' `python` is this virtualenv's, as for a user's own
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    try:
        dag_run = dag.test(run_conf=dict(block.directive.run_conf or {}) or None)
    except Exception as error:
        raise _failure(block, f"dag.test() of {dag.dag_id!r} raised {type(error).__name__}", error) from None
    states = _task_states(dag_run)
    if str(dag_run.state) != "success":
        raise _failure(
            block,
            f"the run of {dag.dag_id!r} on the embedded cluster ({runtime} runtime) ended "
            f"{dag_run.state}: task states {states} (the task logs are in the captured output)",
        )


def _check_includes(block: Block, *, workdir: Path, dags_folder: Path) -> Outcome:
    """A fence that shows repository files: each resolves, runs as a module, and parses as a DAG
    file if it is one (the tests of those files run their DAGs)."""
    outcome = Outcome()
    for include in block.includes:
        assert include.path is not None  # a missing one is among the block's problems
        where = f"{include.file} (included)"
        with isolated(workdir):
            try:
                source = include.path.read_text(encoding="utf-8")
                _, dags = execute(source, str(include.path), f"docs_include_{block.slug}")
            except Exception as error:
                raise _failure(block, f"{where} raised {type(error).__name__}", error) from None
            outcome.executed = True
            if dags:
                expected = {dag.dag_id for dag in dags}
                bag = parse_as_airflow(include.path, include.path.parent)
                outcome.dag_ids.extend(dag.dag_id for dag in _check_dagbag(block, bag, expected, where))
    outcome.skipped_run = "included files are run by their own tests"
    return outcome


def _run_session(block: Block, code: str, filename: str, workdir: Path) -> None:
    """A ``pycon`` block: its ``>>>`` lines run in order and print what the block shows."""
    parser = doctest.DocTestParser()
    first = (block.body_line or 1) - 1
    test = parser.get_doctest(
        block.source, {"__name__": f"docs_session_{block.slug}"}, block.id, filename, first
    )
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    with isolated(workdir):
        result = runner.run(test, out=report.append, clear_globs=True)
    if result.failed:
        raise _failure(
            block,
            f"{result.failed} of {result.attempted} examples of the session failed:\n" + "".join(report),
        )
