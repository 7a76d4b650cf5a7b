"""A2A 1.0 over HTTP: the public agent card and JSON-RPC at /a2a, served by the official a2a-sdk handler.

What is ours here is thin: the card (from settings), the bearer gate (governance.identity.http, one Principal per
request), the call-context builder that hands that Principal to the SDK, the request context builder that refuses
malformed commands before any task exists, and a Content-Type check the SDK does not make. The request handler
(continuations of INPUT_REQUIRED tasks, streams read from durable state, CancelTask's refusal) is a2a_handler's.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from email.utils import format_datetime
from importlib.metadata import PackageNotFoundError, version

from a2a.auth.user import User
from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import build_error_response
from a2a.server.routes import DefaultServerCallContextBuilder, create_agent_card_routes, create_jsonrpc_routes
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidRequestError,
    UnsupportedOperationError,
)
from django.conf import settings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from governance.identity.http import BearerAuth, request_principal
from governance.identity.principal import Principal
from sagas.protocols.a2a.commands import JSON_MEDIA_TYPE, PROTOCOL_VERSION, SagaAgentExecutor, parse_command
from sagas.protocols.a2a.handler import TASK_NOT_CONTINUED, SagaRequestHandler
from sagas.protocols.a2a.task_store import PRINCIPAL_KEY, DjangoTaskStore
from sagas.protocols.body_limit import BodyLimit

RPC_PATH = "/a2a"
# JSON-RPC bodies are JSON; the A2A media type is accepted too (the HTTP+JSON binding uses it).
ACCEPTED_CONTENT_TYPES = ("application/json", "application/a2a+json")


def _command_example(**command: object) -> str:
    return json.dumps(command)


SKILLS = [
    AgentSkill(
        id="transactional-orchestration",
        name="Transactional orchestration",
        description="Run multi-step work as a durable saga: begin, plan version-pinned steps with dependencies and "
        "human approvals, run ready steps in parallel waves, checkpoint, then commit, or roll back to compensate "
        "every completed step newest-first. Operations: begin, plan, run, approve, retry, checkpoint, commit, "
        "rollback.",
        tags=["saga", "transaction", "workflow", "compensation", "approval"],
        examples=[
            _command_example(operation="begin", metadata={"workflow": "employee-onboarding"}),
            _command_example(
                operation="plan", saga_id="<saga-id>", action="create_repository", input={"name": "payments-service"}
            ),
            _command_example(operation="run", saga_id="<saga-id>", max_parallel=4),
            _command_example(operation="commit", saga_id="<saga-id>"),
            _command_example(operation="rollback", saga_id="<saga-id>"),
        ],
    ),
    AgentSkill(
        id="governed-side-effects",
        name="Governed side effects",
        description="Perform one registered, versioned, hash-pinned action now, journaled before it runs, governed "
        "by tenant policy and compensated if the saga unwinds. Operations: execute, list_actions, get_action, "
        "policy_status.",
        tags=["action", "side-effect", "governance", "registry"],
        examples=[
            _command_example(operation="list_actions"),
            _command_example(operation="execute", saga_id="<saga-id>", action="send_email", input={"to": "a@b.c"}),
        ],
    ),
    AgentSkill(
        id="transaction-inspection",
        name="Transaction inspection",
        description="Read a saga and its evidence: status, steps and workflow, a payload-safe timeline, the "
        "hash-chained audit trail and its verification, governance decisions, the tenant's sagas. Operations: get, "
        "timeline, audit, verify_audit, policy_decisions, list_sagas.",
        tags=["saga", "audit", "inspection"],
        examples=[
            _command_example(operation="get", saga_id="<saga-id>"),
            _command_example(operation="verify_audit", saga_id="<saga-id>"),
            _command_example(operation="list_sagas", status="ACTIVE", limit=20),
        ],
    ),
    AgentSkill(
        id="saga-preview",
        name="Saga preview (dry run)",
        description="Know before you act: begin a saga with preview=true, plan and run it, and nothing reaches the "
        "world; the preview report groups the would-be effects by reversibility (irreversible, unknown, "
        "compensable, reversible, read_only), says which steps would wait for approval or be denied, and lists the "
        "compensation plan. Promote it to run the same plan for real with every check made again. Operations: "
        "begin (preview), preview_report, promote.",
        tags=["saga", "preview", "dry-run", "reversibility"],
        examples=[
            _command_example(operation="begin", preview=True, metadata={"workflow": "vendor-payment"}),
            _command_example(operation="preview_report", saga_id="<saga-id>"),
            _command_example(operation="promote", saga_id="<saga-id>"),
        ],
    ),
]


def _package_version() -> str:
    try:
        return version("semantic-saga")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0"


def agent_card() -> AgentCard:
    """The public card. Its URLs come from SAGA_PUBLIC_URL: the SDK's card route sees no request, and a Host header
    is the client's to choose."""
    base = settings.SAGA_PUBLIC_URL.rstrip("/")
    card = AgentCard(
        name="Semantic Saga",
        description="A durable, governed saga coordinator. Send structured commands (exactly one data part, "
        '{"operation": ..., ...}); natural language is never executed. Side effects run only as registered actions, '
        "are journaled before they happen and are compensated when a saga rolls back.",
        version=_package_version(),
        supported_interfaces=[
            AgentInterface(url=f"{base}{RPC_PATH}", protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION)
        ],
        # Claim nothing that is not durable: no live event streams, no push delivery; peers poll GetTask.
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=[JSON_MEDIA_TYPE],
        default_output_modes=[JSON_MEDIA_TYPE],
        skills=SKILLS,
    )
    if settings.SAGA_AUTH_MODE != "none":
        bearer = HTTPAuthSecurityScheme(
            scheme="bearer",
            bearer_format="JWT" if settings.SAGA_AUTH_MODE == "jwt" else "opaque",
            description="Authorization: Bearer <token>; the token's tenant scopes every saga and task.",
        )
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(http_auth_security_scheme=bearer))
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))
    return card


# --- identity and validation hooks into the SDK -----------------------------------------------------------------


class PrincipalUser(User):
    """The SDK's view of our Principal (it logs the user name; tenancy comes from the Principal itself)."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return self.principal.authenticated

    @property
    def user_name(self) -> str:
        return self.principal.principal_id


class PrincipalCallContextBuilder(DefaultServerCallContextBuilder):
    """Puts the request's Principal (set by BearerAuth) into the call context the SDK passes everywhere."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)  # keeps the headers: the SDK reads A2A-Version from them
        principal = request_principal()
        context.state[PRINCIPAL_KEY] = principal
        context.user = PrincipalUser(principal)
        return context


class CommandRequestContextBuilder(SimpleRequestContextBuilder):
    """Refuses a malformed command (-32602, or -32005 for content that is not JSON) and a message to an existing
    task (-32004) before the SDK creates a task for it."""

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if params is not None:
            parse_command(params.message)
        if task_id:
            # The SDK has checked that the tenant owns the task. Refusing before it goes on also keeps the SDK off a
            # path that leaks: for a finished task it builds a new ActiveTask, finds the task terminal and drops it
            # without closing its two event queues, whose dispatcher asyncio tasks are then garbage-collected while
            # pending ("Task was destroyed but it is pending!", and "Failed to detach context" from the SDK's span
            # around each). The -32004 code is the one the SDK answers for a terminal task.
            raise UnsupportedOperationError(message=TASK_NOT_CONTINUED.format(task_id=task_id))
        return await super().build(context, params, task_id, context_id, task)


# --- HTTP ---------------------------------------------------------------------------------------------------------


def _too_large(declared: str, limit: int) -> Response:
    """The A2A shape of a refused body: HTTP 413 carrying a JSON-RPC error that says the limit."""
    size = f"{declared} bytes" if declared else "bigger than that"
    error = InvalidRequestError(
        message=f"The request body is {size}; /a2a accepts at most {limit} (SAGA_MAX_REQUEST_BYTES). Nothing was "
        "read or created: send a smaller message."
    )
    return JSONResponse(build_error_response(None, error), status_code=413)


class RequireJSON:
    """-32005 for a body that is not declared as JSON (the SDK parses any body as JSON whatever its type)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            media_type = Headers(scope=scope).get("content-type", "").split(";", 1)[0].strip().lower()
            if media_type not in ACCEPTED_CONTENT_TYPES:
                error = ContentTypeNotSupportedError(
                    message=f"Content-Type {media_type or '(none)'} is not supported: send the JSON-RPC request as "
                    "Content-Type: application/json."
                )
                # HTTP 200 with a JSON-RPC error, as the SDK answers every protocol error.
                await JSONResponse(build_error_response(None, error))(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _card_routes(card: AgentCard) -> list[BaseRoute]:
    """The SDK's card route (weak ETag, 304 on If-None-Match, Cache-Control), plus Last-Modified."""
    (sdk_route,) = create_agent_card_routes(
        card, cache_control=f"public, max-age={settings.SAGA_A2A_CARD_MAX_AGE_SECONDS}"
    )
    sdk_endpoint = sdk_route.endpoint
    # The card is built once per process from its configuration: it last changed when this process built it.
    last_modified = format_datetime(dt.datetime.now(dt.UTC).replace(microsecond=0), usegmt=True)

    async def card_endpoint(request: Request) -> Response:
        response: Response = await sdk_endpoint(request)
        response.headers["Last-Modified"] = last_modified
        return response

    return [Route(AGENT_CARD_WELL_KNOWN_PATH, endpoint=card_endpoint, methods=["GET"])]


async def _resource_metadata(request: Request) -> Response:
    """RFC 9728 metadata for /a2a (an issuer configured), where BearerAuth's 401 challenge points."""
    from governance.identity.authentication import (
        NO_RESOURCE_METADATA,
        protected_resource_metadata,
        resource_metadata_served,
    )

    if not resource_metadata_served():
        return JSONResponse({"error": "not_found", "error_description": NO_RESOURCE_METADATA}, status_code=404)
    return JSONResponse(protected_resource_metadata(RPC_PATH))


@dataclass(frozen=True)
class A2AApp:
    public_routes: list[BaseRoute]  # the card and the resource metadata: no authentication
    rpc_endpoint: ASGIApp  # for POST /a2a and /a2a/: bearer auth, then the SDK's JSON-RPC dispatcher
    handler: SagaRequestHandler  # the lifespan closes it (drains tasks still running)


def build_http_app() -> A2AApp:
    card = agent_card()
    handler = SagaRequestHandler(
        agent_executor=SagaAgentExecutor(),
        task_store=DjangoTaskStore(),
        agent_card=card,
        request_context_builder=CommandRequestContextBuilder(),
        # Off: parse_command answers -32005 itself, for bare text too (which the SDK lets through), with a message
        # that shows the data part to send.
        validate_input_modes=False,
    )
    context_builder = PrincipalCallContextBuilder()
    sdk_app = Starlette(
        routes=[
            *create_jsonrpc_routes(handler, rpc_url=RPC_PATH, context_builder=context_builder),
            *create_jsonrpc_routes(handler, rpc_url=f"{RPC_PATH}/", context_builder=context_builder),
        ]
    )
    public = [
        *_card_routes(card),
        Route(f"/.well-known/oauth-protected-resource{RPC_PATH}", endpoint=_resource_metadata, methods=["GET"]),
    ]
    limited = BodyLimit(RequireJSON(sdk_app), settings.SAGA_MAX_REQUEST_BYTES, _too_large)
    endpoint = BearerAuth(limited, protocol="a2a", resource_path=RPC_PATH)
    return A2AApp(public_routes=public, rpc_endpoint=endpoint, handler=handler)
