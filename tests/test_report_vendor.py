"""The report's inlined Vega bundle: bundled once per vl-convert and Vega-Lite version, kept in
the user's cache directory, read from there by later reports."""

import pytest
import vl_convert as vlc

from dashboards import vendor


def test_the_bundle_is_cached_on_disk_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    vendor.javascript_bundle.cache_clear()
    try:
        js = vendor.javascript_bundle()
        files = list((tmp_path / "fleet-goodput").iterdir())
        assert [f.suffix for f in files] == [".js"]
        assert (
            js
            == files[0].read_text()
            == vlc.javascript_bundle(vl_version=vendor.vegalite_version())
        )
        assert "vegaEmbed" in js
        # a later process reads the file instead of bundling again
        files[0].write_text("window.vegaEmbed = 'from the cache';")
        vendor.javascript_bundle.cache_clear()
        assert vendor.javascript_bundle() == "window.vegaEmbed = 'from the cache';"
        # a cached file that could end the <script> element is refused, not inlined
        files[0].write_text("x</script><script>alert(1)")
        vendor.javascript_bundle.cache_clear()
        with pytest.raises(RuntimeError, match="cannot be inlined"):
            vendor.javascript_bundle()
    finally:
        vendor.javascript_bundle.cache_clear()


def test_an_unwritable_cache_directory_costs_only_the_bundling(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the cache directory would go
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    vendor.javascript_bundle.cache_clear()
    try:
        assert "vegaEmbed" in vendor.javascript_bundle()
        assert blocked.read_text() == ""
    finally:
        vendor.javascript_bundle.cache_clear()
