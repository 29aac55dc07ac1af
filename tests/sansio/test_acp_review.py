"""The ACP wire (``codexrt._acp._wire``), from the review of issue 30 with an editor author's
eyes: what the official schema lets a client send that the agent refused."""

from __future__ import annotations

import json

import pytest

from codexrt._acp._wire import Invalid, Request, decode_message


def _initialize(**params):
    return decode_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": 1, **params}}))


@pytest.mark.parametrize("caps", [
    {"fs": True},                                   # a bool where an object belongs
    {"terminal": {"output": True}},                 # an object where a bool belongs (a later spec's shape)
    {"elicitation": True},
    {"fs": {"readTextFile": "yes", "writeTextFile": True}},
    {"fs": True, "terminal": {}, "elicitation": {"form": True}},
    None,
])
def test_initialize_takes_a_malformed_capability_as_its_default(caps):
    """The pinned schema marks ``clientCapabilities``, ``clientInfo`` and every capability
    ``x-deserialize-default-on-error``: a value of the wrong shape is read as its default. The
    agent refused the whole ``initialize`` with ``-32602`` instead — an editor whose
    capabilities differ in one field could not use it at all."""
    msg = _initialize(clientCapabilities=caps)
    assert isinstance(msg, Request), msg
    c = msg.params.client_capabilities
    assert c.terminal is False and c.fs.read_text_file is False
    assert c.elicitation is None or c.elicitation.form is None  # nothing malformed grants a capability


def test_initialize_keeps_the_well_formed_capabilities_beside_a_malformed_one():
    msg = _initialize(clientCapabilities={"fs": {"readTextFile": "yes", "writeTextFile": True}, "terminal": "no",
                                          "elicitation": {"form": {}, "url": 3}},
                      clientInfo={"name": 5, "version": "1"})
    assert isinstance(msg, Request), msg
    c = msg.params.client_capabilities
    assert c.fs.write_text_file is True and c.fs.read_text_file is False and c.terminal is False
    assert c.elicitation is not None and c.elicitation.form == {} and c.elicitation.url is None
    assert msg.params.client_info is None  # clientInfo is marked the same way


def test_initialize_still_refuses_what_is_not_marked_default_on_error():
    """``protocolVersion`` is not marked: a string is ``-32602`` naming it (issue 30)."""
    bad = decode_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                     "params": {"protocolVersion": "1", "clientCapabilities": {"fs": True}}}))
    assert isinstance(bad, Invalid) and bad.code == -32602 and "protocolVersion" in bad.message


def test_prompt_blocks_take_a_malformed_marked_field_as_its_default():
    """The same schema mark on content blocks: an image's ``uri``, a resource link's
    ``mimeType``/``title`` and an embedded resource's ``mimeType`` of the wrong type are read
    as absent; the prompt is not refused. Unmarked fields stay strict (a ``text`` that is not a
    string is ``-32602``)."""
    blocks = [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png", "uri": 7},
              {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py", "mimeType": 5, "title": ["x"]},
              {"type": "resource", "resource": {"uri": "file:///w/b.py", "text": "x = 1\n", "mimeType": {}}},
              {"type": "text", "text": "look"}]
    msg = decode_message(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                                     "params": {"sessionId": "s", "prompt": blocks}}))
    assert isinstance(msg, Request), msg
    image, link, res, _ = msg.params.prompt
    assert image.uri is None and link.mime_type is None and link.title is None and res.resource.mime_type is None
    bad = decode_message(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                                     "params": {"sessionId": "s", "prompt": [{"type": "text", "text": 5}]}}))
    assert isinstance(bad, Invalid) and bad.code == -32602


@pytest.mark.parametrize("block", [{"type": [1]}, {"type": {"a": 1}}, {"type": "resource", "resource": 3}, 7, None])
def test_a_prompt_block_of_any_shape_is_answered_not_raised(block):
    """``decode_message`` never raises (its contract): an odd block is ``-32602``."""
    msg = decode_message(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
                                     "params": {"sessionId": "s", "prompt": [block]}}))
    assert isinstance(msg, Invalid) and msg.code == -32602, msg
