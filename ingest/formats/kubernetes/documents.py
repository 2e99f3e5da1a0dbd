"""Reading a file's JSON or YAML documents into the objects they hold (lists unwrapped); one
bad document of a multi-document YAML file costs only itself."""

import json
import re

import yaml

from ingest.base import json_error


def load_documents(text: str) -> tuple[list, list[tuple[int, str, str]]]:
    """(documents of the file, unreadable documents as (line, raw, reason)); raises ValueError
    with a readable message when the file as a whole cannot be read. In a multi-document YAML
    file one bad document costs only itself: the others are read on their own."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped[:1] in ("{", "["):
        try:
            return [json.loads(stripped)], []
        except json.JSONDecodeError as exc:
            raise ValueError(json_error(exc)) from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None], []
    except yaml.YAMLError as exc:
        whole = _yaml_error(exc, 0)
    starts = [0] + [m.start() for m in re.finditer(r"(?m)^---[ \t]*(?:#.*)?$", text)]
    pieces = [
        (text.count("\n", 0, a), text[a:b])
        for a, b in zip(starts, starts[1:] + [len(text)], strict=True)
    ]
    if len([p for _, p in pieces if p.strip()]) < 2:
        raise ValueError(whole)
    docs, bad = [], []
    for first_line, piece in pieces:
        try:
            docs.extend(d for d in yaml.safe_load_all(piece) if d is not None)
        except yaml.YAMLError as exc:
            bad.append((first_line + 1, piece.strip()[:500], _yaml_error(exc, first_line)))
    return docs, bad


def _yaml_error(exc: yaml.YAMLError, line_offset: int) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1 + line_offset} column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
    return f"invalid YAML{where}: {problem}"


def objects(docs: list) -> list:
    out = []
    for d in docs:
        if (
            isinstance(d, dict)
            and isinstance(d.get("items"), list)
            and (d.get("kind") or "").endswith("List")
        ):
            item_kind = d["kind"][: -len("List")] or None
            for it in d["items"]:
                if isinstance(it, dict) and "kind" not in it and item_kind:
                    it = {**it, "kind": item_kind}
                out.append(it)
        elif isinstance(d, list):
            out.extend(d)
        else:
            out.append(d)
    return out
