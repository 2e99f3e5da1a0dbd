"""The README and docs/ name only commands and options the CLI has, link only files that exist,
and the table and format references are current."""

import argparse
import re

import pytest
from conftest import REPO

from ingest.reference import reference as format_reference
from pipelines.cli import build_parser
from warehouse.reference import reference

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# `goodput CMD ...` in code (a block line, or inline code), up to a comment or the code's end
_USE = re.compile(r"goodput\s+(?:--home\s+\S+\s+)?([a-z][a-z-]*)([^`#\n]*)")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _code(text: str) -> list[str]:
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    return [line for b in blocks for line in b.splitlines()] + inline


def _uses() -> list[tuple[str, str, str]]:
    out = []
    for doc in DOCS:
        for line in _code(doc.read_text()):
            for cmd, rest in _USE.findall(re.sub(r"(^|\s)#.*", "", line)):
                out.append((doc.name, cmd, rest))
    return out


def test_docs_name_commands_at_all():
    assert len({c for _, c, _ in _uses()}) >= 10


@pytest.mark.parametrize("doc, cmd, rest", _uses())
def test_every_command_and_option_named_exists(doc, cmd, rest):
    subs = _subcommands()
    assert cmd in subs, f"{doc}: goodput {cmd} is not a command"
    known = {o for a in subs[cmd]._actions for o in a.option_strings}
    known |= {o for a in build_parser()._actions for o in a.option_strings}
    for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
        assert option in known, f"{doc}: goodput {cmd} has no option {option}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_paths_named_exist(doc):
    for path in re.findall(
        r"`((?:docs|benchmarks|tests|sample_data|analysis|ingest|sources|warehouse|pipelines|dashboards)/[\w./-]+\.(?:md|py|csv))`",
        doc.read_text(),
    ):
        assert (REPO / path).exists(), f"{doc.name}: {path} does not exist"


def test_no_links_outside_the_repository():
    for doc in DOCS:
        assert "../shared" not in doc.read_text(), doc.name


def test_table_reference_is_current():
    assert (REPO / "docs" / "tables.md").read_text() == reference(), (
        "run: python -m warehouse.reference > docs/tables.md"
    )


def test_format_reference_is_current():
    assert (REPO / "docs" / "formats.md").read_text() == format_reference(), (
        "run: python -m ingest.reference > docs/formats.md"
    )
