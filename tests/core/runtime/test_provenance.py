

def test_records_name_the_imported_plugins_and_their_source(tmp_path, monkeypatch):
    """Issue 36: records did not name the --import modules that made them."""
    import hashlib
    import sys

    from leap.cli.common import import_modules
    from leap.core.runtime import provenance as prov

    plugin = tmp_path / "my_plugin_for_provenance.py"
    plugin.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(prov, "PLUGINS", [])
    try:
        import_modules(["my_plugin_for_provenance"])
    finally:
        sys.modules.pop("my_plugin_for_provenance", None)
    info = prov.provenance()
    assert info["plugins"] == [{"module": "my_plugin_for_provenance", "file": str(plugin),
                                "sha256": hashlib.sha256(b"X = 1\n").hexdigest()[:16]}]
