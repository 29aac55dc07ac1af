"""R-H-3: the rollout parser's batch decode (one ``decode_lines`` call per chunk) gives exactly
the records, stats, problems and session meta of decoding line by line — over the golden
rollouts and over generated lines (bad JSON, blank lines, two values on one line, values split
over lines, CRLF, unknown types, over-long lines, lines carrying the record's own computed field names,
timestamps/ordinals of other types), whatever the chunking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._legacy import LegacyParser

DATA = Path(__file__).resolve().parents[1] / "data" / "rollouts"


def _run(data: bytes, sizes: list[int], *, batch: bool, max_line: int = 10_000) -> Any:
    p = LegacyParser(batch=batch, max_line=max_line)
    out, i = [], 0
    for n in sizes:
        out += p.feed(data[i:i + n])
        i += n
    out += p.feed(data[i:])
    out += p.close()
    return out, p.stats, p.problems, p.session_meta


def _same(data: bytes, sizes: list[int], max_line: int = 10_000) -> Any:
    a = _run(data, sizes, batch=True, max_line=max_line)
    b = _run(data, sizes, batch=False, max_line=max_line)
    assert a == b
    return a


def test_r_h_3_batch_decode_of_the_golden_rollouts_is_the_line_by_line_parse() -> None:
    for path in sorted(DATA.glob("*.rollout.jsonl")):
        data = path.read_bytes()
        for sizes in ([], [4096] * (len(data) // 4096), [1, 7, 100, 65536]):
            recs, stats, problems, meta = _same(data, sizes, max_line=64 * 1024 * 1024)
            assert stats.records == len(recs) > 0 and not problems and meta is not None


_GOOD = [b'{"type":"session_meta","payload":{"id":"t"}}', b'{"type":"event_msg","payload":{"type":"user_message","message":"hi"}}',
         b'{"type":"response_item","payload":{"type":"message","role":"assistant"},"timestamp":"2026","ordinal":3}',
         b'{"type":"mystery","payload":[1,2]}', b'{"type":"event_msg","payload":{"type":"new_kind"},"metadata":{"a":1}}',
         b'{"type":"turn_context","payload":{"cwd":"/"},"ordinal":true}']
_ODD = [b'', b'   ', b'{"type":', b'"x"} {"type":"y"}', b'{"type":"a"} {"type":"b"}', b'{"type":"a"}\r', b' {"type":"a"}',
        b'{"payload":{}}', b'{"type":5}', b'[1]', b'{"type":"a"', b'}', b'{"type":"x","payload":"' + b'z' * 300 + b'"}',
        b'not json', b'{"type":"a","payload":{"q":1}}}', b'{}', b'{"type":"x"}{"type":"y"}',
        # keys the fast path decodes into the record type: a line's own line_no/subtype/known never
        # survive, a timestamp/ordinal of another type is dropped, escapes decode the same
        b'{"type":"session_meta","subtype":"s","known":false,"line_no":99,"payload":{"id":"u"}}',
        b'{"type":"event_msg","payload":{"type":"nope"},"known":true,"subtype":"agent_message"}',
        b'{"type":"mystery","known":"yes","line_no":"x","subtype":5}', b'{"type":"x","timestamp":5,"ordinal":1.0}',
        b'{"type":"x","ordinal":1e3}', b'{"type":"x","ordinal":99999999999999999999999}',
        b'{"type":"session_\\u006deta","payload":{"id":"esc"},"\\u006bnown":false}',
        b'{"type":"response_item","payload":{"type":5}}', b'{"type":"response_item","payload":[1]}']


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.one_of(st.sampled_from(_GOOD), st.sampled_from(_ODD)), max_size=30),
       tail=st.booleans(), cuts=st.lists(st.integers(1, 400), max_size=6))
def test_r_h_3_batch_decode_of_generated_lines_is_the_line_by_line_parse(lines: list[bytes], tail: bool,
                                                                          cuts: list[int]) -> None:
    data = b"\n".join(lines) + (b"" if tail else b"\n")
    _same(data, cuts, max_line=200)
