"""The official a2a-sdk client, as a peer agent uses it: card, bearer token, commands."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.client import A2ACardResolver, AuthInterceptor, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.auth import CredentialService
from a2a.helpers import get_data_parts, new_data_part
from a2a.types.a2a_pb2 import (
    AgentCard,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

COMPLETED, REJECTED, FAILED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_FAILED
INPUT_REQUIRED, WORKING = TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_WORKING


class BearerToken(CredentialService):
    def __init__(self, token: str) -> None:
        self.token = token

    async def get_credentials(self, security_scheme_name: str, context: ClientCallContext | None) -> str | None:
        return self.token if security_scheme_name == "bearer" else None


@dataclass
class Peer:
    client: Client
    card: AgentCard

    async def send_parts(
        self, parts: list[Part], configuration: SendMessageConfiguration | None = None, **message: Any
    ) -> Task:
        request = SendMessageRequest(
            message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts, **message),
            configuration=configuration,
        )
        task: Task | None = None
        async for event in self.client.send_message(request):
            if event.HasField("task"):
                task = event.task
            elif task is not None:  # a streaming client: the Task comes first, then its changes
                apply(task, event)
        assert task is not None, "SendMessage answered without a task"
        return task

    async def send(
        self, command: dict[str, Any], configuration: SendMessageConfiguration | None = None, **message: Any
    ) -> Task:
        return await self.send_parts([new_data_part(command)], configuration, **message)

    async def ok(self, command: dict[str, Any]) -> dict[str, Any]:
        """Send a command that must succeed; returns its result (the MCP tool's dict)."""
        task = await self.send(command)
        assert task.status.state == COMPLETED, (TaskState.Name(task.status.state), reason(task))
        return result(task)

    async def refused(self, command: dict[str, Any]) -> tuple[Task, str]:
        """Send a command that must be refused in-band; returns the task and the refusal reason."""
        task = await self.send(command)
        assert task.status.state == REJECTED, (TaskState.Name(task.status.state), task)
        return task, reason(task)


@asynccontextmanager
async def connect(base: str, token: str, streaming: bool = False) -> AsyncIterator[Peer]:
    """Resolve the public card, then a client for its JSON-RPC interface that sends the bearer token (and streams
    SendMessage and SubscribeToTask when asked to: the card allows it)."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=120.0)) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(
            card, interceptors=[AuthInterceptor(BearerToken(token))]
        )
        try:
            yield Peer(client, card)
        finally:
            await client.close()


def result(task: Task) -> dict[str, Any]:
    """The one `semantic-saga-result` artifact's data, with whole numbers as ints again (protobuf sends doubles)."""
    (artifact,) = task.artifacts
    assert artifact.name == "semantic-saga-result"
    (part,) = artifact.parts
    assert part.media_type == "application/json"
    data: dict[str, Any] = whole_numbers(get_data_parts([part])[0])
    return data


def apply(task: Task, event: StreamResponse) -> None:
    """A streamed status or artifact update applied to the task it follows."""
    if event.HasField("status_update"):
        task.status.CopyFrom(event.status_update.status)
    elif event.HasField("artifact_update"):
        artifact = event.artifact_update.artifact
        kept = [a for a in task.artifacts if a.artifact_id != artifact.artifact_id]
        del task.artifacts[:]
        task.artifacts.extend([*kept, artifact])


def state_of(event: StreamResponse) -> int | None:
    """The task state a streamed event carries (a Task or a status update), else None (an artifact update)."""
    if event.HasField("task"):
        return int(event.task.status.state)
    if event.HasField("status_update"):
        return int(event.status_update.status.state)
    return None


def reason(task: Task) -> str:
    return "\n".join(part.text for part in task.status.message.parts if part.HasField("text"))


def whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def rpc(base: str, method: str, params: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    """A raw JSON-RPC call, for what the SDK client never sends (no version header, a wrong Content-Type)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return httpx.post(f"{base}/a2a", content=body, headers=headers, timeout=30)
