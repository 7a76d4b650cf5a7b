"""The demo world (examples/demo_mcp_server.py) as a user meets it: `seed` writes the same sample world every time,
`inspect` prints it, tweets are posted and listed, and create_contact can recreate a contact under its old id."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from tests.proxy.conftest import EXAMPLES, load_demo_world

DEMO = EXAMPLES / "demo_mcp_server.py"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DEMO), *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_seed_writes_the_same_sample_world_every_time(tmp_path: Path):
    # when the world is seeded twice into the default state file
    first = _run("seed", cwd=tmp_path)
    once = (tmp_path / "demo-world.json").read_text()
    _run("seed", cwd=tmp_path)
    # then both runs wrote the same world, and said what is in it
    assert first.returncode == 0, first.stderr
    assert "3 contacts, 1 email, 2 tweets" in first.stdout
    assert (tmp_path / "demo-world.json").read_text() == once


def test_inspect_prints_every_part_of_the_world(tmp_path: Path):
    _run("seed", "--state", "w.json", cwd=tmp_path)
    # when
    shown = _run("inspect", "--state", "w.json", cwd=tmp_path)
    # then
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "contacts (3)" and "Ada Lovelace" in lines[1] and "ada@example.com" in lines[1]
    assert "emails sent (1)" in lines and "tweets (2)" in lines and "call log (0)" in lines
    assert any("acc-payroll" in line and "1,000.00" in line for line in lines)


def test_inspect_without_a_world_says_to_seed_first(tmp_path: Path):
    shown = _run("inspect", cwd=tmp_path)
    assert shown.returncode == 1 and "run `demo_mcp_server.py seed` first" in shown.stderr


def test_tweets_are_posted_and_listed_newest_first():
    world = load_demo_world()
    state = world.World()
    state.reset(world.sample_world())

    async def session() -> Any:
        async with Client(world.build_server(state)) as client:
            posted = await client.call_tool("post_tweet", {"text": "hello"})
            assert not posted.is_error
            return (await client.call_tool("list_timeline", {"limit": 2})).structured_content

    timeline = anyio.run(session)
    assert timeline == {
        "tweets": [{"tweet_id": "tw-3", "text": "hello"}, {"tweet_id": "tw-2", "text": "Payroll runs on Fridays."}]
    }


def test_create_contact_recreates_under_an_old_id_and_refuses_a_taken_one():
    world = load_demo_world()
    state = world.World()
    state.reset(world.sample_world())

    async def session() -> tuple[Any, bool, Any]:
        async with Client(world.build_server(state)) as client:
            await client.call_tool("delete_contact", {"id": "c-2"})
            back = await client.call_tool("create_contact", {"id": "c-2", "name": "Grace", "email": "g@example.com"})
            taken = await client.call_tool("create_contact", {"id": "c-1", "name": "X", "email": "x@example.com"})
            fresh = await client.call_tool("create_contact", {"name": "New", "email": "n@example.com"})
            return back.structured_content, taken.is_error, fresh.structured_content

    back, taken, fresh = anyio.run(session)
    assert back == {"id": "c-2", "name": "Grace", "email": "g@example.com"}
    assert taken is True and fresh is not None and fresh["id"] == "c-4"
    assert state.snapshot()["contacts"]["c-1"]["name"] == "Ada Lovelace"
