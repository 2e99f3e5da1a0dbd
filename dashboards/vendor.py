"""Vega, Vega-Lite and Vega-Embed JavaScript from vl-convert-python's bundled copies, so the
report inlines them and never loads anything from the network. Bundling takes seconds, hence
a cache per process and one on disk (the user's cache directory, one file per vl-convert and
Vega-Lite version: the bundle depends on nothing else)."""

from __future__ import annotations

import os
import re
import tempfile
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

import altair as alt
import platformdirs
import vl_convert as vlc


def vegalite_version() -> str | None:
    """The Vega-Lite minor version matching Altair's schema, if vl-convert ships it."""
    minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return minor if minor in vlc.get_vegalite_versions() else None


@lru_cache(maxsize=2)
def javascript_bundle() -> str:
    """One script defining ``window.vegaEmbed``, ``window.vega`` and ``window.vegaLite``.

    It goes inside a ``<script>`` element, so it must not contain a closing script tag or an
    HTML comment opener (either would end or derail the element): refuse rather than guess."""
    vl = vegalite_version()
    cached = Path(platformdirs.user_cache_dir("fleet-goodput")) / (
        f"vl-convert-{version('vl-convert-python')}-vega-lite-{vl}.js"
    )
    try:
        js = cached.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        js = vlc.javascript_bundle(vl_version=vl)
        _write_quietly(cached, js)
    if re.search(r"</script|<!--", js, re.IGNORECASE):
        raise RuntimeError("the vl-convert JavaScript bundle cannot be inlined safely in <script>")
    return js


def _write_quietly(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a reader never sees half a bundle); a cache directory
    that cannot be written only costs the next report the seconds of bundling again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
