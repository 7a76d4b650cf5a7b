"""The console's reads of MCP proxy sessions, in the ledger's terms: the list of sessions (filters by state, client
and server; newest first; pages) and one session (its calls as `semantic-saga ledger` reads them, its audit chain
walked link by link as `semantic-saga verify` walks it, its held calls with what an approver judges, and the undo
requests made of it). Reads only; tenant-scoped through the selectors, like every console read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import QueryDict

from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.models import Node, Saga, Step
from sagas.selectors.approvals import ApprovalContext, waiting_contexts
from sagas.selectors.proxy_chain import ChainWalk, session_chain
from sagas.selectors.proxy_ledger import LedgerRow, ledger_rows
from sagas.selectors.proxy_session_lines import SessionLine, lines_of
from sagas.selectors.proxy_sessions import PROXY_ACTION_PREFIX, proxy_session, proxy_sessions
from sagas.selectors.proxy_text import call_status, milliseconds, size, undo_label, undo_what
from sagas.states import SagaStatus

SESSIONS_PER_PAGE = 25
# Filter choices offered: the newest sessions' clients and servers. A tenant with more distinct ones than this still
# filters by any of them through the URL (?client=...), the menu just lists the common ones.
MAX_CHOICES = 50
CHOICE_SCAN = 500  # sessions scanned for the choices: enough to name what is in use, bounded however old the tenant
# States in which an undo can be asked (the coordinator refuses the rest with its reason; these only decide whether
# the console offers the button).
UNDOABLE = frozenset(
    {
        SagaStatus.ACTIVE,
        SagaStatus.RECOVERY_REQUIRED,
        SagaStatus.FAILED,
        SagaStatus.ROLLING_BACK,
        SagaStatus.ROLLBACK_FAILED,
    }
)


@dataclass(frozen=True)
class SessionFilters:
    state: str = ""
    client: str = ""
    server: str = ""

    @classmethod
    def from_query(cls, query: QueryDict) -> SessionFilters:
        return cls(
            state=query.get("state", "").strip().upper(),
            client=query.get("client", "").strip(),
            server=query.get("server", "").strip(),
        )

    def query(self, **more: Any) -> str:
        """The filters (and `more`, e.g. a page) as a URL query, empty ones left out."""
        values = {"state": self.state, "client": self.client, "server": self.server, **more}
        return urlencode({key: value for key, value in values.items() if value})

    @property
    def active(self) -> bool:
        return bool(self.state or self.client or self.server)


@dataclass(frozen=True)
class SessionList:
    lines: list[SessionLine]
    page: Page[Saga]
    filters: SessionFilters
    states: list[str]
    clients: list[str]
    servers: list[str]


def session_list(*, actor: Principal, filters: SessionFilters, page_number: str | int = 1) -> SessionList:
    """One page of the tenant's proxy sessions matching `filters`, newest first, each as `semantic-saga status`
    lines it up (client, principal, calls by status, held calls, preview or live, state)."""
    sessions = proxy_sessions(actor)
    page = Paginator(_filtered(sessions, filters), SESSIONS_PER_PAGE).get_page(page_number)
    clients, servers = _choices(sessions)
    return SessionList(
        lines=lines_of(list(page.object_list)),
        page=page,
        filters=filters,
        states=[str(status) for status in SagaStatus],
        clients=clients,
        servers=servers,
    )


def _filtered(sessions: QuerySet[Saga], filters: SessionFilters) -> QuerySet[Saga]:
    if filters.state:
        sessions = sessions.filter(status=filters.state)
    if filters.client:
        sessions = sessions.filter(metadata__proxy__client__name=filters.client)
    if filters.server:
        prefix = f"{PROXY_ACTION_PREFIX}{filters.server}."
        called = Step.objects.filter(saga=OuterRef("pk"), action__startswith=prefix)
        held = Node.objects.filter(saga=OuterRef("pk"), action__startswith=prefix)
        sessions = sessions.filter(Q(Exists(called)) | Q(Exists(held)))
    return sessions


def _choices(sessions: QuerySet[Saga]) -> tuple[list[str], list[str]]:
    recent = list(sessions.values_list("pk", "metadata")[:CHOICE_SCAN])
    clients = {_client_name(metadata) for _, metadata in recent} - {""}
    actions = (
        Step.objects.filter(saga_id__in=[pk for pk, _ in recent], action__startswith=PROXY_ACTION_PREFIX)
        .order_by()
        .values_list("action", flat=True)
        .distinct()
    )
    servers = {action.removeprefix(PROXY_ACTION_PREFIX).partition(".")[0] for action in actions}
    return sorted(clients)[:MAX_CHOICES], sorted(servers)[:MAX_CHOICES]


def _client_name(metadata: Any) -> str:
    proxy = metadata.get("proxy") if isinstance(metadata, dict) else None
    client = proxy.get("client") if isinstance(proxy, dict) else None
    return str(client.get("name") or "") if isinstance(client, dict) else ""


# Who decided a call's class (registry.tool_classes' cascade), as the session page says it.
CLASS_SOURCE_WORDS: dict[str, str] = {
    "rule": "an operator's rule",
    "declared_compensation": "a declared inverse",
    "pack": "a pack's declaration",
    "annotation": "the server's annotation",
    "heuristic": "its name",
    "default": "nothing known",
}
# A ledger row's undo status (sagas.selectors.proxy_ledger) where the undo report's words do not cover it.
UNDO_STATUS_WORDS: dict[str, str] = {
    "none": "not undone",
    "undoing": "being undone",
    "failed": "its inverse failed",
}


@dataclass(frozen=True)
class CallView:
    """One proxied call on the session page: the ledger row, and its cells as the terminal words them."""

    row: LedgerRow
    held: ApprovalContext | None  # a held call's approval request, with what an approver judges

    @property
    def status_text(self) -> str:
        return call_status(self.row)

    @property
    def class_source_text(self) -> str:
        """Who decided the call's class, in words (never the classifier's key, `declared_compensation`)."""
        return CLASS_SOURCE_WORDS.get(self.row.class_source, self.row.class_source.replace("_", " "))

    @property
    def undo_status_text(self) -> str:
        """What became of the call in an undo, in the words `semantic-saga undo` uses."""
        status = self.row.undo_status
        return UNDO_STATUS_WORDS.get(status) or undo_label(status).replace("_", " ")

    @property
    def duration(self) -> str:
        return milliseconds(self.row.duration_ms)

    @property
    def result_size(self) -> str:
        return size(self.row.result_bytes)

    @property
    def undo_plan(self) -> dict[str, Any]:
        return dict(self.row.extra.get("undo_plan") or {})

    @property
    def undo_plan_label(self) -> str:
        return undo_label(str(self.undo_plan.get("verdict", "")))

    @property
    def undo_plan_what(self) -> str:
        plan = self.undo_plan
        return undo_what({"detail": plan.get("detail", ""), **plan}) if plan else ""

    @property
    def arguments_json(self) -> str:
        return _pretty(self.row.arguments)

    @property
    def pre_state_json(self) -> str:
        return "" if self.row.pre_state is None else _pretty(self.row.pre_state)

    @property
    def result_json(self) -> str:
        return "" if self.row.result is None else _pretty(self.row.result)


def _pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


@dataclass(frozen=True)
class SessionDetail:
    saga: Saga
    line: SessionLine
    calls: list[CallView]
    chain: ChainWalk
    undo_requests: list[dict[str, Any]]
    checkpoints: list[str]

    @property
    def undoable(self) -> bool:
        return self.saga.status in UNDOABLE


def session_detail(*, actor: Principal, saga_id: object) -> SessionDetail:
    """One proxy session of the actor's tenant (NotFound otherwise, or NOT_A_PROXY_SESSION for a plain saga)."""
    authorize(actor, READ, "get")
    saga = proxy_session(actor=actor, ref=str(saga_id))
    rows = ledger_rows(actor=actor, saga=saga)
    held_nodes = Node.objects.filter(pk__in=[row.id for row in rows if row.seq == 0]).prefetch_related("approvals")
    contexts = {str(ctx.node.id): ctx for ctx in waiting_contexts(list(held_nodes)).values()}
    line = lines_of([saga])[0]
    proxy = saga.metadata.get("proxy", {}) if isinstance(saga.metadata, dict) else {}
    return SessionDetail(
        saga=saga,
        line=line,
        calls=[CallView(row, contexts.get(row.id)) for row in rows],
        chain=session_chain(actor=actor, saga=saga),
        undo_requests=list(proxy.get("undo_requests") or []) if isinstance(proxy, dict) else [],
        checkpoints=line.checkpoints,
    )
