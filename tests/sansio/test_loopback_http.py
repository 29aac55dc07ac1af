"""``codexrt.loopback``'s request-body framing (RFC 9112, ``codexrt/loopback/_http.py``) under
hostile input: any headers and any bytes give the body or one ``ValueError`` — never another
exception, never more than the cap read — and well-framed bodies come back exact."""

from __future__ import annotations

import email.message
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt.loopback._http import read_body

_CAP = 4096


def _headers(pairs: list[tuple[str, str]]) -> email.message.Message:
    msg = email.message.Message()
    for name, value in pairs:
        msg[name] = value
    return msg


_values = st.one_of(st.sampled_from(["chunked", "gzip, chunked", "Chunked ", "chunked, chunked", "", "0", "5",
                                     "+5", "0x5", "5_0", "-1", "5, 5", "5, 6", "99999999999999999999"]),
                    st.text(alphabet="0123456789abcdefxX+-_ ,;\t", max_size=12))
_header_pairs = st.lists(st.tuples(st.sampled_from(["Transfer-Encoding", "Content-Length"]), _values), max_size=3)
_framing = st.lists(st.one_of(st.binary(max_size=40), st.sampled_from([b"\r\n", b"0\r\n", b"5\r\n", b"ff;x=1\r\n",
                                                                        b"0x5\r\n", b"\r\n\r\n"])), max_size=12)


@settings(max_examples=400, deadline=None)
@given(_header_pairs, _framing)
def test_any_headers_and_bytes_give_a_body_or_one_value_error(pairs: list[tuple[str, str]], parts: list[bytes]) -> None:
    raw = b"".join(parts)
    rfile = io.BytesIO(raw)
    try:
        body = read_body(rfile, _headers(pairs), _CAP)
    except ValueError:
        return
    assert isinstance(body, bytes) and len(body) <= _CAP
    assert rfile.tell() <= len(raw)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=_CAP), st.lists(st.integers(1, 300), max_size=20), st.booleans())
def test_a_well_framed_body_comes_back_exact(data: bytes, cuts: list[int], chunked: bool) -> None:
    if chunked:
        framed, rest = b"", data
        for n in cuts:
            piece, rest = rest[:n], rest[n:]
            if piece:
                framed += b"%x\r\n%s\r\n" % (len(piece), piece)
        if rest:
            framed += b"%X ; ext=1\r\n%s\r\n" % (len(rest), rest)
        framed += b"0\r\nX-Trailer: 1\r\n\r\n"
        headers = _headers([("Transfer-Encoding", "chunked"), ("Content-Length", "3")])  # chunked wins
    else:
        framed = data
        headers = _headers([("Content-Length", str(len(data))), ("Content-Length", str(len(data)))])
    rfile = io.BytesIO(framed + b"NEXT REQUEST")
    assert read_body(rfile, headers, _CAP) == data
    assert rfile.read() == b"NEXT REQUEST"  # nothing of the next request was taken
