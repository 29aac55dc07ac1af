"""Redaction stays cheap and precise under many secrets (issue 35, R-WIRE-9).

* all registered values are matched in one pass (a radix-trie pattern of their prefixes,
  rebuilt lazily), so the work per text does not grow with the number of secrets — checked
  here as the compiled matcher's shape, the time ratio is ``bench`` row 8;
* values leave the registry when their last holder lets go (a replaced launch configuration,
  a retired runtime, a collected redactor);
* ordinary text is left alone (``KeyError: 'path'``, ``monkey: banana``) and a key glued to
  letters (``xxxsk-…``) is still caught.
"""

from __future__ import annotations

import gc
import secrets

from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio import _redact
from codexrt._sansio._redact import (
    REDACTED,
    Redactor,
    _Matcher,
    _trie_pattern,
    hold_process_secrets,
    hold_process_secrets_while,
    looks_secret_name,
    process_redactor,
    release_process_secrets,
)

ORDINARY = ["KeyError: 'path'", "monkey: banana", "turkey=roast", "hockey: puck", "keyboard=qwerty",
            "max_tokens=4096", "tokenUsage: 12", '{"inputTokens": 12, "outputTokens": 7}', "donkey = kong",
            "task-manager finished; disk-usage ok", "whiskey: neat", "KeyboardInterrupt: stop",
            "the bearer token is missing", "author: Bob", "keys: 3", "tokens used: 42"]
WORDS = ["path", "banana", "KeyError", "monkey", "turkey", "keyboard", "tokens", "usage", "hockey",
         "jockey", "risk", "task", "desk", "skills", "ask", "whisk", "flask", "keyed", "tokenizer", "value",
         "error", "trace", "line", "42", "file", "main.py", "self", "author", "passport", "secretary"]


def test_issue_35_ordinary_text_is_not_masked() -> None:
    r = Redactor()
    for text in ORDINARY:
        assert r(text) == text, text


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=12),
       seps=st.lists(st.sampled_from([" ", ": ", "=", ", ", "\n", " '", "' ", "(", ")", "\"", "-", "_"]),
                     min_size=12, max_size=12))
def test_issue_35_ordinary_words_untouched_in_any_arrangement(words: list[str], seps: list[str]) -> None:
    text = "".join(w + s for w, s in zip(words, seps))
    assert Redactor()(text) == text


def test_issue_35_names_are_split_into_words() -> None:
    assert not any(looks_secret_name(n) for n in ["KeyError", "monkey", "TOKENS", "tokenUsage", "max_tokens",
                                                   "KeyboardInterrupt", "turkey", "PATH"])
    assert all(looks_secret_name(n) for n in ["apiKey", "api_key", "apikey", "GH_TOKEN2", "accessToken",
                                               "OPENAI_API_KEY", "client_secret", "PGPASSWORD", "x-api-key",
                                               "AWS_SECRET_ACCESS_KEY", "SECRET_KEY_BASE", "secrets", "API_KEYS"])


def test_issue_35_a_key_glued_to_letters_is_caught() -> None:
    r = Redactor()
    key = "sk-proj-" + "Ab3" * 10
    for text in (f"xxx{key}", f"token={key}", f"prefix{key}suffix end", f"{key}"):
        assert "Ab3Ab3" not in r(text), text


_secret = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF, blacklist_categories=("Cs",)),
                  min_size=8, max_size=40).filter(lambda s: len(s.strip()) >= 8)


@settings(max_examples=200, deadline=None)
@given(planted=st.lists(_secret, min_size=1, max_size=30, unique=True), surround=st.lists(st.text(max_size=20), min_size=2,
       max_size=2), which=st.integers(0, 29))
def test_issue_35_every_planted_secret_is_masked_in_any_surrounding_text(planted: list[str], surround: list[str],
                                                                          which: int) -> None:
    """With up to 30 registered values (one matcher for all), each one is masked wherever it
    sits; the text around it survives when it holds no secret."""
    r = Redactor(planted, shared=False)
    value = planted[which % len(planted)]
    out = r(surround[0] + value + surround[1])
    # outside the masks: a planted value that is a piece of the mask's own text ("[REDACTE")
    # is still in the output, inside the mask (no secret holds NUL: the alphabet starts at "!");
    # a value that holds the mask's text is looked for as it is (left unmasked, it would show)
    shown = out if REDACTED in value else out.replace(REDACTED, "\0")
    assert value not in shown and REDACTED in out


def test_issue_35_the_matcher_is_a_trie_not_a_list_of_alternatives() -> None:
    """300 random keys compile to one pattern whose top level branches on the first character
    (at most one alternative per distinct character) — the engine's work per position is
    bounded by the alphabet, not by the key count; values longer than the anchor are checked
    whole."""
    keys = [secrets.token_urlsafe(30) for _ in range(300)]
    pattern = _trie_pattern(k[:_redact._ANCHOR] for k in keys)
    assert pattern.count("|") < 300 * 4  # a radix trie: shared prefixes branch once
    m = _Matcher(keys + ["x" * 100 + "tail-of-a-long-value"])
    text = "a " + keys[7] + " b " + "x" * 100 + "tail-of-a-long-value c " + "x" * 100 + "other"
    assert m.sub(text) == f"a {REDACTED} b {REDACTED} c " + "x" * 100 + "other"


def _naive(values: list[str], text: str) -> str:
    """Leftmost, then longest, value at each position (what one big alternation did)."""
    out, i = [], 0
    ordered = sorted(values, key=len, reverse=True)
    while i < len(text):
        hit = next((v for v in ordered if text.startswith(v, i)), None)
        if hit is None:
            out.append(text[i])
            i += 1
        else:
            out.append(REDACTED)
            i += len(hit)
    return "".join(out)


def test_issue_35_longest_value_wins_and_short_values_inside_a_long_prefix_are_found() -> None:
    values = ["abcdefgh" * 10, "abcdefgh", "abcdefghabcd"]
    m = _Matcher(values)
    for text in ("abcdefgh" * 10, "abcdefghabcdZZ", "abcdefgh" * 7 + "!", "xabcdefgh" * 9):
        assert m.sub(text) == _naive(values, text)
    assert m.sub("abcdefgh" * 10) == REDACTED


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.text("abc", min_size=8, max_size=70), min_size=1, max_size=8, unique=True),
       text=st.text("abcx", max_size=200))
def test_issue_35_matcher_equals_leftmost_longest(values: list[str], text: str) -> None:
    """Over a tiny alphabet (prefixes shared and overlapping, values longer and shorter than
    the anchor) the one-pass matcher masks exactly what leftmost-longest matching masks."""
    planted = text[:50] + values[0] + text[50:]
    assert _Matcher(values).sub(planted) == _naive(values, planted)


def test_issue_35_a_replaced_configuration_lets_go_of_its_secrets() -> None:
    old, new = "old-key-" + secrets.token_hex(8), "new-key-" + secrets.token_hex(8)
    redact = process_redactor()
    hold_process_secrets("test.launch", [old])
    assert old not in redact(f"x {old}")
    hold_process_secrets("test.launch", [new])  # replaced: the old key is no secret any more
    assert old in redact(f"x {old}") and new not in redact(f"x {new}")
    release_process_secrets("test.launch")
    assert new in redact(f"x {new}")


def test_issue_35_values_are_refcounted_across_holders() -> None:
    shared = "shared-" + secrets.token_hex(8)
    a, b = Redactor([shared]), Redactor([shared])
    redact = process_redactor()
    a.release()
    assert shared not in redact(shared)  # b still holds it
    b.set_secrets([])
    assert shared in redact(shared)


def test_issue_35_a_collected_holder_lets_go() -> None:
    value = "gone-" + secrets.token_hex(8)
    r = Redactor([value])
    assert value not in process_redactor()(value)
    del r
    gc.collect()
    assert value in process_redactor()(value)

    class Config:
        pass

    cfg = Config()
    hold_process_secrets_while(cfg, [value])
    assert value not in process_redactor()(value)
    del cfg
    gc.collect()
    assert value in process_redactor()(value)


def test_issue_35_the_registry_does_not_grow_with_replaced_configurations() -> None:
    before = len(_redact._PROCESS)
    for _ in range(300):
        hold_process_secrets("test.growth", ["k-" + secrets.token_hex(16)])
    assert len(_redact._PROCESS) - before <= 5  # one key's variants
    release_process_secrets("test.growth")
    assert len(_redact._PROCESS) == before


def test_issue_35_a_release_from_a_finalizer_never_blocks_on_the_lock_its_thread_holds():
    """weakref.finalize runs release(); a collection can run it while this thread holds the
    registry's lock (inside sub(), building the matcher). It must not wait there (a real launch
    test deadlocked): the release is queued and applied by the next locked step."""
    from codexrt._sansio._redact import _KnownValues

    known = _KnownValues()
    known.add("sk-finalizer-secret-000000000000", owner="cfg")
    assert "[REDACTED]" in known.sub("x sk-finalizer-secret-000000000000 y") or \
        "sk-finalizer-secret-000000000000" not in known.sub("x sk-finalizer-secret-000000000000 y")
    with known._lock:  # as inside sub() when a finalizer fires
        known.release("cfg")  # returns at once
    assert "sk-finalizer-secret-000000000000" in known.sub("x sk-finalizer-secret-000000000000 y")
    assert len(known) == 0
