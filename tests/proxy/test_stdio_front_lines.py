"""The stdio front reads the agent's lines without buffering one past its limit: a longer line, however long,
becomes one unreadable line (the SDK's server answers it as a parse error) and the next line is read as usual."""

from __future__ import annotations

import asyncio

from sagas.protocols.proxy.stdio_front import _StreamLines


def test_a_line_past_the_limit_is_dropped_to_its_end_and_the_next_one_is_read():
    async def scenario() -> list[bytes]:
        stream = asyncio.StreamReader(limit=64)
        lines = _StreamLines(stream, transport=None)  # type: ignore[arg-type]
        stream.feed_data(b"x" * 1000 + b"\n" + b'{"next": 1}\n' + b"y" * 500)
        stream.feed_eof()
        return [await lines.readline(), await lines.readline(), await lines.readline(), await lines.readline()]

    first, second, third, end = asyncio.run(scenario())

    assert first == b"{oversized line}\n"
    assert second == b'{"next": 1}\n'
    assert third == b"{oversized line}\n" and end == b""  # the last, unfinished one too; then the end
