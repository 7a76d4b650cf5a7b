"""What a downstream asks of its client during a call (elicitation, sampling, roots) and what it reports (progress,
log messages) reach the agent through the proxy, and the agent's answers go back."""

from __future__ import annotations

import asyncio
import json

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.proxy.agent import Agent, connect, text
from tests.proxy.harness import ServedProxy


def test_elicitation_sampling_and_roots_are_relayed_to_the_agent_and_back(served: ServedProxy):
    agent = Agent(answer="blue")

    async def scenario() -> list[dict[str, object]]:
        async with connect(served.url, "legacy", agent) as client:
            results = [
                await client.call_tool("tiny__ask_user", {"question": "Favourite colour?"}),
                await client.call_tool("tiny__summarize", {"text": "a very long text"}),
                await client.call_tool("tiny__client_roots", {}),
            ]
            assert not any(result.is_error for result in results), [text(r) for r in results]
            return [json.loads(text(result)) for result in results]

    # when
    elicited, sampled, roots = asyncio.run(scenario())

    # then: the agent was asked what the downstream asked, marked as the server's, and the downstream got the
    # agent's answers
    assert agent.elicitations == ['[asked by the MCP server "tiny", not by Semantic Saga]\nFavourite colour?']
    assert elicited == {"action": "accept", "content": {"answer": "blue"}}
    assert agent.samplings == ["a very long text"]
    assert sampled == {"summary": "a short summary", "model": "agent-model"}
    assert roots == {"roots": ["file:///work/agent-root"]}


def test_progress_and_log_messages_are_relayed_to_the_calling_agent(served: ServedProxy):
    agent = Agent()
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def scenario() -> str:
        async with connect(served.url, "legacy", agent) as client:
            result = await client.call_tool("tiny__slow_report", {"steps": 3}, progress_callback=on_progress)
            return text(result)

    answer = asyncio.run(scenario())

    assert json.loads(answer) == {"steps": 3}
    assert progress == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert agent.logs == ["did step 1", "did step 2", "did step 3"]


def test_a_stateless_agent_is_not_asked_and_the_downstream_hears_why(served: ServedProxy):
    # a 2026-07-28 request has no back channel: the proxy refuses the elicitation, and the tiny server, which
    # does not handle the refusal, answers the call with that error
    async def scenario() -> MCPError:
        async with connect(served.url, "auto") as client:
            with pytest.raises(MCPError) as failed:
                await client.call_tool("tiny__ask_user", {"question": "Anyone there?"})
            return failed.value

    error = asyncio.run(scenario())

    assert "cannot carry elicitation requests" in error.message


def test_a_request_the_proxy_cannot_attribute_to_one_agent_asks_nobody(served: ServedProxy):
    # Alice's call waits in her elicitation; Bob's call to the same server asks too: with two agents in flight on
    # one shared downstream session, the proxy cannot tell whose request it is and shows it to neither.
    alice, bob = Agent(answer="alice's answer"), Agent()
    alice_asked, release_alice = anyio.Event(), anyio.Event()
    answer_like_alice = alice.elicit

    async def alice_waits(context: object, params: object) -> object:
        alice_asked.set()
        await release_alice.wait()
        return await answer_like_alice(context, params)  # type: ignore[arg-type]

    alice.elicit = alice_waits  # type: ignore[method-assign]

    async def scenario() -> tuple[str, MCPError]:
        async with (
            connect(served.url, "legacy", alice) as alice_client,
            connect(served.url, "legacy", bob) as bob_client,
        ):
            async with anyio.create_task_group() as group:
                alice_result: list[str] = []

                async def alice_calls() -> None:
                    result = await alice_client.call_tool("tiny__ask_user", {"question": "for Alice"})
                    alice_result.append(text(result))

                group.start_soon(alice_calls)
                with anyio.fail_after(30):
                    await alice_asked.wait()
                with pytest.raises(MCPError) as refused:
                    await bob_client.call_tool("tiny__ask_user", {"question": "for Bob"})
                release_alice.set()
            return alice_result[0], refused.value

    alice_answer, bob_error = asyncio.run(scenario())

    assert json.loads(alice_answer)["content"] == {"answer": "alice's answer"}
    assert "cannot tell which one this elicitation request is for, so it asked none" in bob_error.message
    assert bob.elicitations == [] and alice.elicitations == [
        '[asked by the MCP server "tiny", not by Semantic Saga]\nfor Alice'
    ]
