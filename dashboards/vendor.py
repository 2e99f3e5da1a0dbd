"""Vega, Vega-Lite and Vega-Embed JavaScript from vl-convert-python's bundled copies, so the
report inlines them and never loads anything from the network. Bundling takes seconds, hence
the per-process cache."""

from __future__ import annotations

import re
from functools import lru_cache

import altair as alt
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
    js = vlc.javascript_bundle(vl_version=vegalite_version())
    if re.search(r"</script|<!--", js, re.IGNORECASE):
        raise RuntimeError("the vl-convert JavaScript bundle cannot be inlined safely in <script>")
    return js
