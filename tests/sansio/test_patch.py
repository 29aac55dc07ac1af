"""Sans-IO tests of native file-change patches (R-EDIT-1, R-EDIT-3): parse the real shapes,
reverse them, and check a reverse against current text — a mismatch is a Conflict."""

from __future__ import annotations

import difflib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._errors import CodexError, RemoteProtocolError
from codexrt._sansio._patch import (
    BinaryContentError,
    ChangeKind,
    Conflict,
    FileOp,
    PatchFormatError,
    ReversePlan,
    apply_hunks,
    decode_text,
    parse_apply_patch,
    parse_change,
    parse_unified_diff,
    plan_apply,
    render,
    reverse,
    split_lines,
)


def similar_diff(old: str, new: str, n: int = 1) -> str:
    """A unified diff in the format codex sends for ``update`` (the Rust ``similar`` crate:
    no ---/+++ header, ``@@ -a,b +c,d @@``, ``,1`` omitted, ``\\ No newline…`` markers)."""
    a, b = split_lines(old), split_lines(new)
    out = []

    def rng(start: int, length: int) -> str:
        if length == 1:
            return f"{start + 1}"
        return f"{start if length == 0 else start + 1},{length}"

    def emit(tag: str, v: str) -> None:
        out.append(tag + v if v.endswith("\n") else tag + v + "\n\\ No newline at end of file\n")

    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(n):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{rng(i1, i2 - i1)} +{rng(j1, j2 - j1)} @@\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                for v in a[x1:x2]:
                    emit(" ", v)
                continue
            for v in a[x1:x2]:
                emit("-", v)
            for v in b[y1:y2]:
                emit("+", v)
    return "".join(out)


def v2(path: str, kind: str, diff: str, move_path: str | None = None) -> dict:
    k: dict = {"type": kind}
    if kind == "update":
        k["move_path"] = move_path
    return {"path": path, "kind": k, "diff": diff}


OLD = "".join(f"line {i}\n" for i in range(1, 21))
NEW = OLD.replace("line 3\n", "LINE three\n").replace("line 15\n", "line 15\nadded\n")


def test_r_edit_1_add_diff_is_full_content():
    p = parse_change(v2("/w/hello.txt", "add", "hello world\n"))
    assert p.kind is ChangeKind.ADD and p.content == "hello world\n"
    assert (p.added, p.removed) == (1, 0)
    assert p.target == "/w/hello.txt" and p.rename_source is None


def test_r_edit_1_delete_diff_is_old_content():
    p = parse_change(v2("/w/gone.txt", "delete", "a\nb\n"))
    assert p.kind is ChangeKind.DELETE and p.content == "a\nb\n"
    assert (p.added, p.removed) == (0, 2)


def test_r_edit_1_update_several_hunks_counts():
    diff = similar_diff(OLD, NEW)
    p = parse_change(v2("f.txt", "update", diff))
    assert p.kind is ChangeKind.UPDATE and len(p.hunks) == 2
    assert (p.added, p.removed) == (2, 1)
    assert apply_hunks(OLD, p.hunks) == NEW


def test_r_edit_1_move_strips_moved_to_suffix():
    diff = similar_diff("a\nb\n", "a\nc\n") + "\n\nMoved to: /w/new.txt"
    p = parse_change(v2("/w/old.txt", "update", diff, move_path="/w/new.txt"))
    assert p.kind is ChangeKind.MOVE and p.native_kind == "update"
    assert p.rename_source == "/w/old.txt" and p.target == "/w/new.txt"
    assert len(p.hunks) == 1


def test_pure_rename_has_no_hunks():
    p = parse_change(v2("/w/a", "update", "\n\nMoved to: /w/b", move_path="/w/b"))
    assert p.kind is ChangeKind.MOVE and p.hunks == ()
    r = reverse(p)
    assert (r.path, r.move_path) == ("/w/b", "/w/a")
    plan = plan_apply(r, {"/w/b": "x\n", "/w/a": None})
    assert plan == ReversePlan((FileOp("/w/a", "x\n", mode_from="/w/b"), FileOp("/w/b", None)))


def test_core_shape_parses_too():
    p = parse_change({"type": "update", "unified_diff": similar_diff("a\n", "b\n"), "move_path": None}, path="/w/x")
    assert p.kind is ChangeKind.UPDATE and p.path == "/w/x"
    p = parse_change({"type": "delete", "content": "z\n"}, path="/w/z")
    assert p.kind is ChangeKind.DELETE


def test_missing_eof_newline_marker_round_trip():
    old, new = "a\nb", "a\nc\n"
    diff = similar_diff(old, new)
    assert "\\ No newline at end of file" in diff
    p = parse_change(v2("f", "update", diff))
    assert apply_hunks(old, p.hunks) == new
    assert apply_hunks(new, reverse(p).hunks) == old
    # ...and the other way round: Codex removed the final newline
    p2 = parse_change(v2("f", "update", similar_diff("x\ny\n", "x\nY")))
    assert apply_hunks("x\nY", reverse(p2).hunks) == "x\ny\n"


def test_crlf_lines_kept_byte_exact():
    old, new = "a\r\nb\r\n", "a\r\nB\r\n"
    p = parse_change(v2("f", "update", similar_diff(old, new)))
    assert apply_hunks(new, reverse(p).hunks) == old


def test_r_edit_3_reverse_of_add_checks_content():
    p = parse_change(v2("/w/f", "add", "new\n"))
    r = reverse(p)
    assert r.kind is ChangeKind.DELETE
    assert plan_apply(r, {"/w/f": "new\n"}) == ReversePlan((FileOp("/w/f", None),))
    c = plan_apply(r, {"/w/f": "new\nuser line\n"})
    assert isinstance(c, Conflict) and "changed" in c.reason
    assert "+user line" in c.diff


def test_r_edit_3_reverse_of_delete_never_overwrites():
    r = reverse(parse_change(v2("/w/f", "delete", "old\n")))
    assert plan_apply(r, {"/w/f": None}) == ReversePlan((FileOp("/w/f", "old\n"),))
    c = plan_apply(r, {"/w/f": "user made a new one\n"})
    assert isinstance(c, Conflict) and "overwrite" in c.reason


def test_r_edit_3_update_conflict_after_user_edit():
    p = parse_change(v2("/w/f", "update", similar_diff(OLD, NEW)))
    edited = NEW.replace("LINE three\n", "LINE three (user)\n")
    c = plan_apply(reverse(p), {"/w/f": edited})
    assert isinstance(c, Conflict)
    assert "hunk 1" in c.reason and "LINE three (user)" in c.diff
    # a user edit far from any hunk that shifts no line is fine
    ok = plan_apply(reverse(p), {"/w/f": NEW.replace("line 10\n", "line ten\n")})
    assert isinstance(ok, ReversePlan)
    assert ok.ops[0].content == OLD.replace("line 10\n", "line ten\n")


def test_update_shifted_by_user_insert_is_conflict_not_guess():
    p = parse_change(v2("/w/f", "update", similar_diff(OLD, NEW)))
    c = plan_apply(reverse(p), {"/w/f": "user header\n" + NEW})
    assert isinstance(c, Conflict)


def test_move_back_conflicts_when_source_reoccupied():
    p = parse_change(v2("/w/a", "update", "\n\nMoved to: /w/b", move_path="/w/b"))
    c = plan_apply(reverse(p), {"/w/b": "x\n", "/w/a": "someone\n"})
    assert isinstance(c, Conflict) and c.path == "/w/a"


def test_binary_refused_with_typed_error():
    with pytest.raises(BinaryContentError) as ei:
        parse_change(v2("/w/bin", "add", "PK\x00\x03"))
    assert isinstance(ei.value, CodexError) and ei.value.code == "BINARY_CONTENT"
    with pytest.raises(BinaryContentError):
        decode_text(b"\xff\xfe\x00a")
    with pytest.raises(BinaryContentError):
        decode_text(b"caf\xe9\n")
    assert decode_text("café\n".encode()) == "café\n"


@pytest.mark.parametrize(
    "change",
    [
        {"path": "/w/f", "kind": {"type": "rename"}, "diff": ""},
        {"path": "/w/f", "kind": {"type": "update"}, "diff": "@@ -1,2 +1,2 @@\n a\n-b\n"},
        {"path": "/w/f", "kind": {"type": "update"}, "diff": "garbage\n"},
        {"path": "/w/f", "kind": {"type": "update"}, "diff": "@@ -1 +1 @@\n-a\n+b\n+c\n"},
        {"path": "/w/f", "kind": {"type": "add"}},
        {"kind": {"type": "add"}, "diff": "x"},
        {"nothing": True},
    ],
)
def test_malformed_changes_are_remote_protocol_errors(change):
    with pytest.raises(PatchFormatError) as ei:
        parse_change(change)
    assert isinstance(ei.value, RemoteProtocolError) and ei.value.code == "PATCH_FORMAT"


def test_git_headers_skipped_and_render_round_trips():
    p = parse_change(v2("src/f.py", "update", similar_diff(OLD, NEW)))
    text = render(p)
    assert text.startswith("--- a/src/f.py\n+++ b/src/f.py\n@@ -2,3 +2,3 @@")
    assert parse_unified_diff("diff --git a/x b/x\nindex 1..2 100644\n" + text) == p.hunks
    add = render(parse_change(v2("/w/n", "add", "a\nb")))
    assert add == "--- /dev/null\n+++ /w/n\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"


def test_empty_context_line_without_space_is_context():
    hunks = parse_unified_diff("@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n")
    assert apply_hunks("a\n\nb\n", hunks) == "a\n\nc\n"


def test_pure_insert_and_pure_delete_hunks():
    old, new = "a\nb\nc\n", "a\nb\nX\nY\nc\n"
    p = parse_change(v2("f", "update", similar_diff(old, new, n=0)))
    assert p.hunks[0].old_len == 0
    assert apply_hunks(old, p.hunks) == new
    assert apply_hunks(new, reverse(p).hunks) == old
    p = parse_change(v2("f", "update", similar_diff("a\n", "")))
    assert apply_hunks("", reverse(p).hunks) == "a\n"


_line = st.sampled_from(["a\n", "b\n", "c\n", "d\r\n", "\n", "é\n"])
_text = st.builds(
    lambda ls, tail: "".join(ls) + tail, st.lists(_line, max_size=12), st.sampled_from(["", "z", "a"])
)


@settings(max_examples=60, deadline=None)
@given(_text, _text, st.integers(0, 2))
def test_r_edit_3_property_reverse_restores_byte_exact(old, new, ctx):
    diff = similar_diff(old, new, n=ctx)
    p = parse_change(v2("/w/f", "update", diff))
    assert apply_hunks(old, p.hunks) == new
    plan = plan_apply(reverse(p), {"/w/f": new})
    assert isinstance(plan, ReversePlan)
    assert plan.ops[0].content == old


# -- apply_patch envelopes (the model's patch text; display and matching only) --------------

ENVELOPE = (
    "*** Begin Patch\r\n"
    "*** Add File: docs/new.md\r\n+---\r\n+title: x\r\n+++ not a header\r\n"
    "*** Update File: conf.yaml\n*** Move to: conf/main.yaml \n@@ top\n----\n a: 1\n-b: 2\n+b: 3\n*** End of File\n"
    "*** Delete File: gone.txt\n"
    "*** End Patch"
)


def test_r_h_4_envelope_sections_kinds_moves_and_grammar_counts():
    """R-H-4: one file per section; ``+``/``-`` lines count whatever follows them (the envelope
    has no ``---``/``+++`` headers, so a YAML ``---`` added or removed is a line); markers and
    the ``Move to`` line are not body; CRLF bodies keep their endings."""
    add, upd, dele = parse_apply_patch(ENVELOPE)
    assert (add.kind, add.path, add.move_path, add.added, add.removed) == ("add", "docs/new.md", None, 3, 0)
    assert add.content == "---\r\ntitle: x\r\n++ not a header\r\n"
    assert (upd.kind, upd.path, upd.move_path, upd.added, upd.removed) == ("update", "conf.yaml", "conf/main.yaml", 1, 2)
    assert upd.body == "@@ top\n----\n a: 1\n-b: 2\n+b: 3\n"
    assert (dele.kind, dele.path, dele.lines) == ("delete", "gone.txt", ())


def test_r_h_4_envelope_is_lenient_and_splits_on_newline_only():
    """Text before the first header is ignored, no header gives ``()``, nothing raises; a
    form feed or U+2028 inside a line does not split it (``str.splitlines`` would)."""
    assert parse_apply_patch("no patch here\n+x\n") == ()
    assert parse_apply_patch("") == ()
    [f] = parse_apply_patch("junk\n*** Add File: a\n+one\u2028still one\x0cand one\n")
    assert (f.added, f.lines) == (1, ("+one\u2028still one\x0cand one\n",))


def test_r_h_4_r_h_5_history_and_wrapper_replay_read_envelopes_with_the_one_parser():
    """R-H-4/R-H-5: the history projection's file changes and the wrapper replay's patch
    previews come from :func:`parse_apply_patch`, so they agree file for file."""
    from codexrt._sansio._projection import parse_apply_patch as projection_files
    from codexrt._sansio._wrappers import WrapperCall, attribute_wrapper

    src = "await tools.apply_patch(" + json.dumps(ENVELOPE) + ");"
    [preview] = attribute_wrapper(WrapperCall(src, None), []).previews
    want = [(f.path, f.added, f.removed, f.move_path) for f in parse_apply_patch(ENVELOPE)]
    assert [(f.path, f.added, f.removed, f.move_to) for f in preview.files] == want
    assert [(c.path, c.added, c.removed, c.move_path) for c in projection_files(ENVELOPE)] == want
    assert [c.kind for c in projection_files(ENVELOPE)] == ["add", "move", "delete"]

