"""Policy revisions as evidence: each change of the policy in force is a POLICY_REVISION_CHANGED event.

The policy is one file (or one OPA decision) for every tenant, and its revision is file-wide, so a change is
recorded once, in the deployment's control-plane chain (audit.control_plane.SYSTEM_TENANT), with the backend, the
revision the file declares, the SHA-256 of the policy itself (an edit that forgets to bump `revision` still shows)
and the previous state. Never the policy's content.

There is no "change the policy" operation to hook: every process reloads the file when it changes
(governance.policy.engine). So every process compares what it loaded with the chain's newest
POLICY_REVISION_CHANGED, under the chain's lock, and appends only on a difference: ten workers noticing one edit
write one event, and a restart with the same policy writes none. A deployment that never had a policy (mode none)
records nothing; switching back to none after one is a change like any other.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from audit import control_plane
from audit.canonical import sha256_hex
from audit.models import EventType

if TYPE_CHECKING:  # the backends load when one is configured (governance.policy.engine._build), not before
    from governance.policy.json_rules import JsonPolicy
    from governance.policy.opa import OpaPolicy
    from governance.policy.rego import RegoPolicy

    PolicyBackend = JsonPolicy | RegoPolicy | OpaPolicy

NO_POLICY_STATE: dict[str, Any] = {"backend": "none", "revision": None, "policy_sha256": None}
# What makes two states the same policy; `file` is informative only (one file has many spellings of its path).
IDENTITY_KEYS = ("backend", "revision", "policy_sha256", "endpoint")


def state_of(policy: PolicyBackend | None) -> dict[str, Any]:
    """What is in force, as recorded: ids and digests only."""
    if policy is None:
        return dict(NO_POLICY_STATE)
    from governance.policy.json_rules import JsonPolicy
    from governance.policy.rego import RegoPolicy

    state: dict[str, Any] = {"backend": policy.backend, "revision": policy.revision}
    if isinstance(policy, JsonPolicy):
        state.update(policy_sha256=sha256_hex(policy.document), file=str(settings.SAGA_POLICY_FILE))
    elif isinstance(policy, RegoPolicy):
        state.update(policy_sha256=hashlib.sha256(policy.text.encode()).hexdigest(), file=str(policy.path))
    else:
        # OPA holds the policy; the endpoint says which one. Credentials in a URL are dropped, never recorded.
        state.update(policy_sha256=None, endpoint=_without_credentials(policy.endpoint))
    return state


def record_if_changed(state: dict[str, Any]) -> bool:
    """Append POLICY_REVISION_CHANGED if `state` differs from the newest one recorded; returns whether it did.

    Call inside a transaction of your own (the chain's lock is held until it ends).
    """
    if _same(_recorded(), state):
        return False  # the common case, answered without a lock
    chain = control_plane.lock_chain(control_plane.SYSTEM_TENANT)
    previous = _recorded()  # again under the lock: another process may have recorded this very change meanwhile
    if _same(previous, state):
        return False
    event = control_plane.change(
        EventType.POLICY_REVISION_CHANGED,
        control_plane.process_actor(),
        status=state["backend"],
        data={**state, "previous": _identity(previous) if previous else None},
    )
    control_plane.append_changes(chain, [event])
    return True


def _recorded() -> dict[str, Any] | None:
    return control_plane.last_change_data(control_plane.SYSTEM_TENANT, EventType.POLICY_REVISION_CHANGED)


def _identity(state: dict[str, Any]) -> dict[str, Any]:
    return {key: state[key] for key in IDENTITY_KEYS if key in state}


def _same(previous: dict[str, Any] | None, state: dict[str, Any]) -> bool:
    return _identity(previous or NO_POLICY_STATE) == _identity(state)


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # an IPv6 literal keeps its brackets
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
