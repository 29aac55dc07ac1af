"""Split from ``tests/e2e/test_docs_snippets.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

from codexrt_cli._apidoc import API_MD, render
from tests.e2e.test_docs_snippets import snippets


def test_snippet_parser_honours_the_marker(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("a\n\n```python\nprint(1)\n```\n<!-- not-run: needs a host -->\n\n```python\nboom(\n```\n")
    assert [(code, run) for _, code, run in snippets(doc)] == [("print(1)\n", True), ("boom(\n", False)]


def test_api_reference_is_fresh():
    expected = render()
    actual = API_MD.read_text(encoding="utf-8") if API_MD.exists() else ""
    assert actual == expected, "docs/api.md is stale: run `.venv/bin/python -m codexrt_cli._apidoc`"
