"""The README and docs/: every doc is reachable, every link resolves, every command runs as shown.

A command is a line of a ``bash`` or ``sh`` block, or a ``$ `` line of a ``console`` block
(``text`` blocks hold synopses and sample output and are not read). A block's tag after the
language says more: ``bash run`` blocks run here, in the repository root, and must exit 0;
``bash real-build`` blocks need a real build (a conda-build work dir, Docker) and are only
parsed. "Runs as shown" is otherwise checked without running builds: the program is one this
feedstock ships (its script exists and its own argument parser accepts the arguments, config
names resolve to ``.ci_support`` configs), a test path pytest is given exists, a requirements
file pip is given exists, or the program is one of the few outside tools the docs name (conda,
docker, anaconda, grep, otool). Every repository path the prose names in backticks
(``scripts/...``, ``recipe/...``, ``tests/...``, ``docs/...``, ``.ci/...``) exists, so a moved
script or package leaves no stale path behind. docs/ stays within a word budget, and neither
code nor docs name this project's issues or notes outside the repository.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest
from feedstock import doc_tables
from feedstock.cli import BY_NAME, load
from feedstock.configs import list_configs, resolve_configs
from feedstock.errors import FeedstockError
from megabuild.pipeline.description import When

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]

# The shell languages whose lines are commands; "console" shows commands after "$ ".
SHELL_BLOCKS = {"bash", "sh"}
# Programs of other projects the docs show; their commands are not checked here.
OUTSIDE_TOOLS = {"conda", "docker", "anaconda", "grep", "otool"}
# The tags of a shell block (after its language): run here, or needs a real build.
RUN, REAL_BUILD = "run", "real-build"
# The pages for maintainers at work (walkthrough, debugging guide, checklist): every shell block
# there is tagged, so that a reader knows which commands run on a plain checkout.
TAGGED_PAGES = ("build.md", "debugging.md", "first-real-build.md")
# docs/ is read whole by maintainers: its prose stays within this many words (wc -w); the generated
# tables are data (scripts/update_doc_tables.py writes them from the files that hold their reasons)
WORD_BUDGET = 10_000
GENERATED_TABLE = re.compile(r"<!-- generated: [^>]*-->.*?<!-- end generated -->", re.S)
# conda-build's variables, as the commands of docs/architecture.md use them in a build script.
BUILD_VARIABLES = {
    "RECIPE_DIR": "/feedstock/recipe",
    "SRC_DIR": "/work",
    "PREFIX": "/prefix",
    "SP_DIR": "/prefix/lib/python3.13/site-packages",
    "PY_VER": "3.13",
    "target_platform": "linux-64",
    "CONFIG": "linux_64_cpu_mkl",  # build_steps.sh's, in the checklist's log paths
}
# Tools whose positional ``config``/``configs`` or ``--config`` name .ci_support configs.
CONFIG_ARGUMENTS = ("config", "configs")
TOOLS_TAKING_CONFIGS = {
    "build-locally.py",
    "render",
    "build-all",
    "cfep03-bundle",
    "demo-megabuild",
}


@dataclass(frozen=True)
class Command:
    page: Path
    line: int
    argv: tuple[str, ...]
    tags: tuple[str, ...] = ()
    text: str = ""  # the whole shell line

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}: {shlex.join(self.argv)}"


def _fenced_blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """(language and tags, line number of the first line, lines) of each fenced block."""
    language, start, body = None, 0, []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            if language is None:
                language, start, body = stripped[3:].strip() or "text", number + 1, []
            else:
                yield language, start, body
                language = None
        elif language is not None:
            body.append(line.strip())


def _expand(token: str, where: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in BUILD_VARIABLES:
            pytest.fail(f"{where}: ${name} is no build variable the docs may use (BUILD_VARIABLES)")
        return BUILD_VARIABLES[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, token)


def _split(line: str, where: str) -> list[tuple[str, ...]]:
    """The simple commands of one shell line (split at ``&&``, ``;`` and ``|``), comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="&;|")
    lexer.whitespace_split = True
    commands: list[tuple[str, ...]] = [()]
    for token in lexer:
        if token in {"&&", ";", "|"}:
            commands.append(())
        else:
            commands[-1] += (_expand(token, where),)
    return [c for c in commands if c]


def _logical_lines(language: str, body: list[str]) -> Iterator[tuple[int, str]]:
    pending, first = "", 0
    for offset, line in enumerate(body):
        if language == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        elif not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            first = offset
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield first, pending + line
        pending = ""


def shell_blocks(page: Path) -> Iterator[tuple[str, tuple[str, ...], int, list[str]]]:
    """(language, tags, first line, lines) of each shell or console block."""
    for header, start, body in _fenced_blocks(page.read_text(encoding="utf-8")):
        language, *tags = header.split()
        if language in SHELL_BLOCKS | {"console"}:
            yield language, tuple(tags), start, body


def commands_of(page: Path) -> list[Command]:
    found = []
    for language, tags, start, body in shell_blocks(page):
        for offset, line in _logical_lines(language, body):
            where = f"{page.relative_to(ROOT)}:{start + offset}"
            found += [Command(page, start + offset, argv, tags, line) for argv in _split(line, where)]
    return found


ALL_COMMANDS = [c for page in PAGES for c in commands_of(page)]


# -- checking one command -------------------------------------------------------------------------


class _Parsed(Exception):
    def __init__(self, namespace: argparse.Namespace) -> None:
        self.namespace = namespace


def _load_script(path: Path) -> ModuleType:
    name = "_doc_command_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in the script look their module up
    spec.loader.exec_module(module)
    return module


def parsed_arguments(
    main: Any,
    args: list[str],
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> argparse.Namespace:
    """What ``main(args)``'s own parser makes of ``args``; stops the tool right after parsing."""
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self: argparse.ArgumentParser, *a: Any, **kw: Any) -> NoReturn:
        raise _Parsed(original(self, *a, **kw))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    takes_argv = bool(inspect.signature(main).parameters)
    if not takes_argv:  # a main() that reads sys.argv, as a benchmark's may
        monkeypatch.setattr(sys, "argv", [where, *args])
    try:
        main(args) if takes_argv else main()
    except _Parsed as parsed:
        return parsed.namespace
    except SystemExit as exit:
        if exit.code == 0 and {"-h", "--help"} & set(args):  # the help printed, then exit 0
            return argparse.Namespace()
        pytest.fail(f"{where}: the tool's parser refuses the arguments: {capsys.readouterr().err.strip()}")
    finally:
        monkeypatch.undo()
    pytest.fail(f"{where}: the tool returned without parsing its arguments")


def _check_configs(namespace: argparse.Namespace, where: str) -> None:
    configs = list_configs(ROOT)
    for attribute in CONFIG_ARGUMENTS:
        value = getattr(namespace, attribute, None)
        for name in [value] if isinstance(value, str) else value or []:
            try:
                resolve_configs(name, configs)
            except FeedstockError as exc:
                pytest.fail(f"{where}: {exc}")


# pytest options whose value is the next argument (no path to check there)
PYTEST_VALUE_OPTIONS = {"-n", "--dist", "-m", "-k", "-p", "--durations"}


def _check_pytest(args: list[str], where: str) -> None:
    for previous, arg in zip(["", *args], args):
        if arg.startswith("-") or previous in PYTEST_VALUE_OPTIONS:
            continue
        path, _, node = arg.partition("::")
        assert (ROOT / path).exists(), f"{where}: no {path}"
        if node:
            name = node.split("[")[0].split("::")[-1]
            assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), f"{where}: no test {node}"


def _check_pip(args: list[str], where: str) -> None:
    assert args[:1] == ["install"], f"{where}: the docs show pip only installing"
    for flag, value in zip(args, args[1:]):
        if flag == "-r":
            assert (ROOT / value).is_file(), f"{where}: no requirements file {value}"


def _check_tool(args: list[str], where: str, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """``python -m feedstock <command> ...``: the command exists and its parser takes the arguments."""
    if not args or args[0] in ("-h", "--help"):
        return
    command = BY_NAME.get(args[0])
    if command is None:
        pytest.fail(f"{where}: python -m feedstock has no command {args[0]!r}")
    namespace = parsed_arguments(load(command), args[1:], where, monkeypatch, capsys)
    if command.name in TOOLS_TAKING_CONFIGS:
        _check_configs(namespace, where)


def check_python(args: list[str], where: str, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    if args[:2] == ["-m", "megabuild"]:
        from megabuild.cli import main as megabuild_main

        parsed_arguments(megabuild_main, args[2:], where, monkeypatch, capsys)
    elif args[:2] == ["-m", "pytest"]:
        _check_pytest(args[2:], where)
    elif args[:2] == ["-m", "pip"]:
        _check_pip(args[2:], where)
    elif args[:1] == ["-c"]:  # a one-line program: nothing of ours to check
        pass
    elif args[:2] == ["-m", "feedstock"]:
        _check_tool(args[2:], where, monkeypatch, capsys)
    elif args and args[0].endswith(".py"):
        script = ROOT / args[0]
        assert script.is_file(), f"{where}: no script {args[0]}"
        namespace = parsed_arguments(_load_script(script).main, args[1:], where, monkeypatch, capsys)
        if script.name in TOOLS_TAKING_CONFIGS:
            _check_configs(namespace, where)
    else:
        pytest.fail(f"{where}: a python command the docs test does not know how to check")


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=lambda c: f"{c.page.name}:{c.line}")
def test_every_command_runs_as_shown(
    command: Command, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = list(command.argv)
    if argv[:1] == ["env"]:  # env NAME=VALUE ... command
        argv.pop(0)
    while argv and re.fullmatch(r"[A-Za-z_]\w*=.*", argv[0]):  # NAME=VALUE before a command
        argv.pop(0)
    assert argv, f"{command.where()}: an assignment without a command"
    program, *args = argv
    where = command.where()
    if program in {"python", "python3"}:
        check_python(args, where, monkeypatch, capsys)
    elif program == "pytest":
        _check_pytest(args, where)
    elif program == "pip":
        _check_pip(args, where)
    elif program == "export":
        assert all(re.fullmatch(r"\w+=.*", a) for a in args), f"{where}: export NAME=VALUE"
    elif program == "bash":
        assert (ROOT / args[0]).is_file(), f"{where}: no script {args[0]}"
    else:
        assert program in OUTSIDE_TOOLS, f"{where}: unknown program {program!r} (OUTSIDE_TOOLS?)"


def test_the_docs_show_commands() -> None:
    """The extraction itself: a block the test could not read would pass silently."""
    pages = {c.page for c in ALL_COMMANDS}
    assert README in pages and len(pages) >= 4, sorted(p.name for p in pages)
    shown = {" ".join(c.argv[1:4]) for c in ALL_COMMANDS if c.argv[0].startswith("python")}
    assert {"build-locally.py linux_64_cuda12.6", "-m feedstock build-all", "-m feedstock bump"} <= {
        " ".join(s.split()[:3]) for s in shown
    }


def test_a_wrong_command_is_caught(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check can fail: an option a tool does not have, and a config that does not exist."""
    with pytest.raises(pytest.fail.Exception, match="refuses the arguments"):
        check_python(["-m", "feedstock", "build-all", "--no-such-option"], "doc:1", monkeypatch, capsys)
    with pytest.raises(pytest.fail.Exception, match="has no command"):
        check_python(["-m", "feedstock", "no-such-command"], "doc:1", monkeypatch, capsys)
    with pytest.raises(pytest.fail.Exception, match="unknown config"):
        check_python(["build-locally.py", "linux_64_cuda99.9"], "doc:2", monkeypatch, capsys)
    with pytest.raises(pytest.fail.Exception, match="refuses the arguments"):
        check_python(["-m", "megabuild", "split", "stage", "--tree"], "doc:3", monkeypatch, capsys)


# -- the README's promises ------------------------------------------------------------------------


def test_readme_is_short_and_shows_the_two_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines; details belong in docs/"
    assert "python build-locally.py linux_64_cuda12.6" in lines
    # .ci/run runs the README's test command (tests/test_ci_scripts.py checks it is this one)
    test_command = (
        "python -m pip install -q -e . -r tests/requirements.txt && python -m pytest -q -n 2 --dist loadfile"
    )
    assert test_command in lines


def test_readme_counts_the_jobs_of_each_platform() -> None:
    """The platform table's jobs column is the number of .ci_support configs per platform."""
    text = README.read_text("utf-8")
    rows = re.findall(r"^\| ([a-z]+-[a-z0-9]+)[^|]*\|.*\| (\d+) \|$", text, re.M)
    shown = {platform: int(jobs) for platform, jobs in rows}
    assert len(shown) == 5, shown  # every platform has its row
    configs = [p.stem for p in (ROOT / ".ci_support").glob("*.yaml")]
    counted = {
        platform: sum(c.startswith(platform.replace("-", "_") + "_") for c in configs) for platform in shown
    }
    assert shown == counted, (shown, counted)
    total = re.search(r"^\| all \|.*\| (\d+) \|$", text, re.M)
    assert total and int(total.group(1)) == len(configs)


def test_readme_names_the_feedstock_it_is() -> None:
    """conda-smithy's README names the feedstock (meta.yaml's ``extra.feedstock-name``, the GitHub
    repository): "About <name>-feedstock" and its links to the repository."""
    meta = (ROOT / "recipe" / "meta.yaml").read_text(encoding="utf-8")
    found = re.search(r"^  feedstock-name: (\S+)$", meta, flags=re.M)
    assert found, "meta.yaml has no extra.feedstock-name"
    feedstock = f"{found.group(1)}-feedstock"
    readme = README.read_text(encoding="utf-8")
    title, underline = readme.splitlines()[:2]
    assert title == f"About {feedstock}" and underline == "=" * len(title), (title, underline)
    repos = set(re.findall(r"github\.com/conda-forge/([\w.-]+-feedstock)\b", readme))
    assert repos == {feedstock}, repos


def test_readme_names_the_feedstock_maintainers() -> None:
    meta = (ROOT / "recipe" / "meta.yaml").read_text(encoding="utf-8")
    block = meta.split("recipe-maintainers:", 1)[1]
    maintainers = re.findall(r"^\s+- (\S+)", block, flags=re.M)
    readme = README.read_text(encoding="utf-8").split("## Feedstock maintainers", 1)[1]
    assert maintainers and all(f"@{m}" in readme for m in maintainers), maintainers


# -- links ----------------------------------------------------------------------------------------


def _prose(text: str) -> str:
    """The text outside fenced blocks (a link-like string in a sample output is no link)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _links(page: Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text(encoding="utf-8")))


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", _prose(page.read_text(encoding="utf-8")), flags=re.M)
    return {slug(h) for h in headings}


def test_every_doc_is_linked_from_the_readme() -> None:
    linked = {(README.parent / target.split("#")[0]).resolve() for target in _links(README)}
    assert DOCS, "docs/ has no documents"
    missing = [d.name for d in DOCS if d.resolve() not in linked]
    assert not missing, f"docs not linked from README.md: {missing}"


# A path into the repository in the prose: a backticked span that starts with one of its dirs.
REPO_PATH = re.compile(r"`((?:scripts|recipe|tests|docs|\.ci|\.ci_support|\.scripts|\.github)/[^`\s]*)`")


def stale_paths(page: Path) -> list[str]:
    """Repository paths named in the prose that do not exist (globs must match something)."""
    stale = []
    for span in REPO_PATH.findall(_prose(page.read_text(encoding="utf-8"))):
        path, _, node = span.partition("::")
        matches = [m for m in ROOT.glob(path)] if any(c in path for c in "*?[") else [ROOT / path]
        found = [m for m in matches if m.exists()]
        test = node.split("[")[0].split("::")[-1]
        if not found or (node and f"def {test}(" not in found[0].read_text(encoding="utf-8")):
            stale.append(span)
    return stale


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_paths_the_docs_name_exist(page: Path) -> None:
    stale = stale_paths(page)
    assert not stale, f"{page.relative_to(ROOT)}: no such path in the repository: {stale}"


def test_a_stale_path_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("`recipe/megabuild/build/steps.py`, `scripts/demo_megabuild.py`, `recipe/meta.yaml`")
    assert stale_paths(page) == ["recipe/megabuild/build/steps.py", "scripts/demo_megabuild.py"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_and_anchors_resolve(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def test_the_slug_is_githubs() -> None:
    assert slug("Uploading local builds (CFEP-03): scripts/cfep03_bundle.py") == (
        "uploading-local-builds-cfep-03-scriptscfep03_bundlepy"
    )
    assert slug("What `conda install pytorch` resolves to") == "what-conda-install-pytorch-resolves-to"


# -- tables rendered from code and data (scripts/feedstock/doc_tables.py) ------------------------


def test_generated_tables_equal_the_code_and_data() -> None:
    found: set[str] = set()
    for doc in doc_tables.DOCS:
        text = doc.read_text()
        found |= set(re.findall(r"<!-- generated: ([a-z-]+) -->", text))
        assert doc_tables.refresh(text) == text, (
            f"{doc.name}: stale tables: run python scripts/update_doc_tables.py"
        )
    assert found == set(doc_tables.tables())


def test_a_table_restated_by_hand_is_caught() -> None:
    """Planted: a pipeline row edited by hand (a step's platform rule) no longer equals PIPELINE."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("|  | split link-back"))
    edited = text.replace(row, row.replace(When.LINK_BACK.value, When.ALWAYS.value))
    assert edited != text and doc_tables.refresh(edited) == text
    with pytest.raises(doc_tables.DocTableError, match="unknown generated tables"):
        doc_tables.refresh("<!-- generated: pipline -->\n<!-- end generated -->\n")
    with pytest.raises(doc_tables.DocTableError, match="1 generated blocks open, 0 end"):
        doc_tables.refresh("<!-- generated: pipeline -->\n")


# -- megabuild's help: it runs from the repository root, its examples print one a line -------------

MEGABUILD_HELP = "PYTHONPATH=recipe python -m megabuild --help"


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser and every subparser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _parsers(sub)


def run_together_examples(parser: argparse.ArgumentParser) -> list[str]:
    """The example lines of a parser's description and epilog (indented by four spaces, as in a
    docstring's literal block) that its help does not print as a line of their own."""
    shown = {line.strip() for line in parser.format_help().splitlines()}
    written = "\n".join(t for t in (parser.description, parser.epilog) if t)
    examples = [line.strip() for line in written.splitlines() if line.startswith("    ") and line.strip()]
    return [line for line in examples if line not in shown]


def test_megabuild_help_runs_from_the_repository_root() -> None:
    """The README's command, as a maintainer types it in a fresh checkout; it lists every group."""
    import subprocess

    from megabuild.cli import build_parser

    assert MEGABUILD_HELP in README.read_text(encoding="utf-8").splitlines()
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "megabuild", "--help"],
        cwd=ROOT, env={**env, "PYTHONPATH": "recipe"}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    groups = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert {"build", "check-binaries", "env", "cache", "split"} <= set(groups.choices)
    missing = [name for name in groups.choices if f"    {name}" not in proc.stdout]
    assert not missing, f"not in megabuild --help: {missing}"


def test_every_help_prints_its_examples_one_a_line() -> None:
    from megabuild.cli import build_parser

    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 20  # the walk reached the subcommands
    bad = {p.prog: run_together_examples(p) for p in parsers if run_together_examples(p)}
    assert not bad, f"examples run together into a paragraph: {bad}"


def test_a_run_together_example_is_caught() -> None:
    """Planted: argparse's default formatter refills ``megabuild build``'s description."""
    from megabuild.pipeline import cli as pipeline_cli

    assert pipeline_cli.__doc__
    plain = argparse.ArgumentParser(prog="megabuild build", description=pipeline_cli.__doc__)
    assert "python -m megabuild build top-level        # build.sh / bld.bat, PKG_NAME=libtorch-split" in (
        run_together_examples(plain)
    )


# -- no references to this project's issues, rounds or notes outside the repository ---------------

# Docstrings, comments and docs say what is and why: conda-forge's feedstock's threads are named
# as owner/repo#N, this project's own issues and working notes are not named at all.
_ROUND = "this" + " round"  # spelled apart so that this file does not match itself
FORBIDDEN = re.compile(
    r"\bissues? \d+|\b" + _ROUND + r"\b|\bdesign notes\b|\bdesign\.md\b|/work/shared"
    r"|\banchor(?:'s)? (?:issue|pr|pull request) #?\d+",
    re.I,
)
# trees no one writes by hand here (conda-smithy's output) or that are not ours
NOT_SCANNED = {".git", ".ci_support", ".scripts", ".github", "build_artifacts", "__pycache__"}
NOT_SCANNED_FILES = {"LICENSE.txt"}


# the docs name conda-forge's pytorch-cpu feedstock by its name
_ANCHOR = re.compile(r"\bthe anchor\b|\banchor feedstock\b", re.I)


def forbidden_references(text: str) -> list[str]:
    return [m.group(0) for m in FORBIDDEN.finditer(text)]


def _scanned_files(pages: bool) -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if NOT_SCANNED & set(rel.parts) or any(p.startswith(".") and p != ".ci" for p in rel.parts):
            continue
        if not path.is_file() or path.name in NOT_SCANNED_FILES or path.stat().st_size > 2_000_000:
            continue
        if (not pages and path in PAGES) or path == Path(__file__).resolve():  # it spells the patterns
            continue
        yield path


@pytest.mark.parametrize("pages", [False, True], ids=["code", "docs"])
def test_no_project_issue_numbers_or_rounds(pages: bool) -> None:
    found = {}
    for path in _scanned_files(pages) if not pages else PAGES:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if hits := forbidden_references(text) + (_ANCHOR.findall(text) if pages else []):
            found[str(path.relative_to(ROOT))] = hits
    assert not found, f"say what and why, not which issue or round: {found}"


def test_a_project_reference_is_caught() -> None:
    planted = "fixed in issue 31 (issue 33, item 4) " + _ROUND + "; see design notes; anchor issue 343"
    assert len(forbidden_references(planted)) == 5
    assert forbidden_references("conda-forge/pytorch-cpu-feedstock#343, pytorch/pytorch#180247") == []


# -- the word budget, and the commands of the pages maintainers work from -------------------------


def test_the_docs_fit_the_word_budget() -> None:
    words = {d.name: len(GENERATED_TABLE.sub("", d.read_text(encoding="utf-8")).split()) for d in DOCS}
    assert sum(words.values()) <= WORD_BUDGET, f"docs/ has {sum(words.values())} words: {words}"


@pytest.mark.parametrize("name", TAGGED_PAGES)
def test_every_shell_block_of_the_working_pages_is_tagged(name: str) -> None:
    page = ROOT / "docs" / name
    blocks = list(shell_blocks(page))
    assert blocks, f"{name} shows no commands"
    untagged = [start for _, tags, start, _ in blocks if not {RUN, REAL_BUILD} & set(tags)]
    assert not untagged, f"docs/{name}: blocks at lines {untagged} say neither '{RUN}' nor '{REAL_BUILD}'"


def runnable_lines() -> list[Command]:
    """One entry per shell line of a ``run`` block (a line may hold several commands)."""
    lines = {(c.page, c.line): c for c in ALL_COMMANDS if RUN in c.tags}
    return list(lines.values())


def test_the_working_pages_show_commands_that_run_here() -> None:
    pages = {c.page.name for c in runnable_lines()}
    assert {"build.md", "debugging.md"} <= pages, pages


def run_here(text: str) -> Any:
    """Run one shell line as a maintainer types it in a checkout: ``python`` is this
    interpreter, no PYTHONPATH, the repository root as the working dir."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail; " + text],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("command", runnable_lines(), ids=lambda c: f"{c.page.name}:{c.line}")
def test_the_run_commands_run(command: Command) -> None:
    proc = run_here(command.text)
    output = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, f"{command.where()}: exit {proc.returncode}\n{output}"


def test_a_run_command_that_fails_is_caught() -> None:
    """Planted: a config that does not exist, and a command the tools do not have."""
    assert run_here("python -m feedstock render linux_64_cuda99.9").returncode == 2
    assert run_here("python -m feedstock no-such-command").returncode == 2
