"""semantic-saga-mcp's flags beyond storage, registry and policy: identity, files, leases, recovery, the PostgreSQL
pool, origins, OpenTelemetry, OPA's timeout, the version, and the A2A command's own, each with the seed's meaning.

`seed_environment` turns the flags given into our environment variables, which saga_project.seed_cli puts into
os.environ before Django loads settings, so a flag wins over the environment and `.env` and is checked at start like
any setting. Only flags given are translated: a default never overrides a variable the environment sets. A flag
we cannot honour stops the command with the reason (SeedFlagRefused), never silently ignored; one that has nothing
to act on here is accepted with a note on stderr. docs/configuration.md, "From semantic-saga-mcp", lists them all.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
from dataclasses import dataclass, field

# The seed's own defaults for its list flags: a repeated flag adds to them (argparse's append onto a default list),
# so `--auth-tenant-claim org` meant tenant_id, tid, org_id, org there, and means the same here.
SEED_JWT_ALGORITHMS = ("RS256",)
SEED_TENANT_CLAIMS = ("tenant_id", "tid", "org_id")
# Where our MCP and A2A endpoints are: fixed paths under SAGA_PUBLIC_URL.
MCP_PATH = "/mcp"
A2A_PATH = "/a2a"


class SeedFlagRefused(Exception):
    """A seed flag we cannot honour: the message says why and what to do instead."""


@dataclass
class Translation:
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # flags accepted without effect, said on stderr at start


def version() -> str:
    try:
        return importlib.metadata.version("semantic-saga")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def add_seed_flags(parser: argparse.ArgumentParser) -> None:
    """The flags, each with the variable it sets; defaults are None so that only flags given are translated."""
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()} (Semantic Saga)")
    parser.epilog = (
        "Each flag sets the variable its help names, over the environment and .env; docs/configuration.md, "
        "'From semantic-saga-mcp', says where a flag differs from semantic-saga-mcp's and why."
    )
    auth = parser.add_argument_group("identity (semantic-saga-mcp's --auth-* flags)")
    auth.add_argument("--auth-mode", choices=["none", "jwt", "static"], help="SAGA_AUTH_MODE.")
    auth.add_argument("--auth-static-tokens", help="SAGA_AUTH_STATIC_TOKENS: token file, ours or the seed's format.")
    auth.add_argument("--auth-issuer", help="SAGA_JWT_ISSUER: advertised in OAuth metadata; checked in jwt mode.")
    auth.add_argument("--auth-resource-url", help="SAGA_PUBLIC_URL: this URL without its final /mcp.")
    auth.add_argument("--auth-audience", help="SAGA_JWT_AUDIENCE.")
    auth.add_argument("--auth-jwks-url", help="SAGA_JWT_JWKS_URL.")
    auth.add_argument("--auth-jwt-algorithm", action="append", help="SAGA_JWT_ALGORITHMS: RS256 plus each given.")
    auth.add_argument("--auth-required-scope", action="append", help="SAGA_AUTH_REQUIRED_SCOPES (repeatable).")
    auth.add_argument(
        "--auth-tenant-claim", action="append", help="SAGA_JWT_TENANT_CLAIMS: tenant_id, tid, org_id plus each given."
    )
    auth.add_argument("--auth-roles-claim", help="SAGA_JWT_ROLES_CLAIM.")
    auth.add_argument("--auth-principal-type-claim", help="SAGA_JWT_PRINCIPAL_TYPE_CLAIM.")
    auth.add_argument(
        "--auth-allow-missing-tenant", action="store_true", default=None, help="SAGA_JWT_ALLOW_MISSING_TENANT=true."
    )
    auth.add_argument(
        "--trust-identity-headers", action="store_true", default=None, help="Refused: identity comes from tokens only."
    )
    auth.add_argument(
        "--allow-unauthenticated-http", action="store_true", default=None, help="SAGA_ALLOW_UNAUTHENTICATED=true."
    )
    auth.add_argument(
        "--allow-unauthenticated-a2a", action="store_true", default=None, help="SAGA_ALLOW_UNAUTHENTICATED=true."
    )
    auth.add_argument("--allowed-origin", action="append", help="SAGA_ALLOWED_ORIGINS (repeatable).")
    run = parser.add_argument_group("execution")
    run.add_argument("--file-root", help="SAGA_FILE_ROOT: where create_text_file writes.")
    run.add_argument("--lease-seconds", type=float, help="SAGA_LEASE_SECONDS (at least 2).")
    run.add_argument("--recovery-limit", type=int, help="SAGA_RECOVERY_BATCH: sagas per category per recovery pass.")
    run.add_argument("--postgres-pool-min", type=int, help="SAGA_DB_POOL_MIN_SIZE.")
    run.add_argument("--postgres-pool-max", type=int, help="SAGA_DB_POOL_MAX_SIZE.")
    run.add_argument("--dry-run", action="store_true", default=None, help="Refused: use a preview saga instead.")
    run.add_argument(
        "--allow-legacy-action-recovery", action="store_true", default=None, help="Accepted; nothing to act on."
    )
    run.add_argument("--policy-opa-timeout", type=float, help="SAGA_OPA_TIMEOUT_SECONDS.")
    run.add_argument("--otel-headers", help="OTEL_EXPORTER_OTLP_HEADERS (key=value,...).")
    run.add_argument("--otel-service-name", help="OTEL_SERVICE_NAME.")
    run.add_argument("--a2a-rpc-path", help="Must be /a2a, where our A2A JSON-RPC is served.")


def seed_environment(args: argparse.Namespace) -> Translation:
    """Our variables for the seed flags given in `args`; raises SeedFlagRefused for one we cannot honour."""
    _refuse_what_we_cannot_honour(args)
    out = Translation()
    env = out.env
    for flag, variable in (
        ("auth_mode", "SAGA_AUTH_MODE"),
        ("auth_issuer", "SAGA_JWT_ISSUER"),
        ("auth_audience", "SAGA_JWT_AUDIENCE"),
        ("auth_jwks_url", "SAGA_JWT_JWKS_URL"),
        ("auth_roles_claim", "SAGA_JWT_ROLES_CLAIM"),
        ("auth_principal_type_claim", "SAGA_JWT_PRINCIPAL_TYPE_CLAIM"),
        ("lease_seconds", "SAGA_LEASE_SECONDS"),
        ("recovery_limit", "SAGA_RECOVERY_BATCH"),
        ("postgres_pool_min", "SAGA_DB_POOL_MIN_SIZE"),
        ("postgres_pool_max", "SAGA_DB_POOL_MAX_SIZE"),
        ("policy_opa_timeout", "SAGA_OPA_TIMEOUT_SECONDS"),
        ("otel_headers", "OTEL_EXPORTER_OTLP_HEADERS"),
        ("otel_service_name", "OTEL_SERVICE_NAME"),
    ):
        if (value := getattr(args, flag)) is not None:
            env[variable] = f"{value:g}" if isinstance(value, float) else str(value)
    for flag, variable in (("auth_static_tokens", "SAGA_AUTH_STATIC_TOKENS"), ("file_root", "SAGA_FILE_ROOT")):
        if value := getattr(args, flag):
            env[variable] = os.path.abspath(value)
    if args.auth_jwt_algorithm:
        env["SAGA_JWT_ALGORITHMS"] = ",".join(dict.fromkeys([*SEED_JWT_ALGORITHMS, *args.auth_jwt_algorithm]))
    if args.auth_tenant_claim:
        env["SAGA_JWT_TENANT_CLAIMS"] = ",".join(dict.fromkeys([*SEED_TENANT_CLAIMS, *args.auth_tenant_claim]))
    if args.auth_required_scope:
        env["SAGA_AUTH_REQUIRED_SCOPES"] = ",".join(args.auth_required_scope)
    if args.allowed_origin:  # added to the variable's list, as the seed added them (it read the same variable)
        current = [o.strip() for o in os.environ.get("SAGA_ALLOWED_ORIGINS", "").split(",") if o.strip()]
        env["SAGA_ALLOWED_ORIGINS"] = ",".join(dict.fromkeys([*current, *args.allowed_origin]))
    if args.auth_allow_missing_tenant:
        env["SAGA_JWT_ALLOW_MISSING_TENANT"] = "true"
    if args.allow_unauthenticated_http or args.allow_unauthenticated_a2a:
        env["SAGA_ALLOW_UNAUTHENTICATED"] = "true"
    if args.auth_resource_url:
        env["SAGA_PUBLIC_URL"] = _public_url_of_resource(args.auth_resource_url)
    if args.allow_legacy_action_recovery:
        out.notes.append(
            "--allow-legacy-action-recovery has no effect here: it let the seed compensate steps journaled before "
            "its 0.5 without a contract snapshot, and every step Semantic Saga journals keeps its contract."
        )
    return out


def _refuse_what_we_cannot_honour(args: argparse.Namespace) -> None:
    if args.trust_identity_headers:
        raise SeedFlagRefused(
            "--trust-identity-headers is not supported: Semantic Saga never takes identity from "
            "X-Semantic-Saga-* headers. Have the proxy pass a bearer token instead (--auth-mode jwt with your "
            "identity provider, or --auth-mode static), or keep the proxy authenticating and run with "
            "--allow-unauthenticated-http, where every caller acts as the local admin."
        )
    if args.dry_run:
        raise SeedFlagRefused(
            "--dry-run is not supported: Semantic Saga has no server-wide dry run, and serving without it would "
            "send real requests. Preview a saga instead: begin_saga with preview: true records what each step would "
            "do and sends nothing (docs/preview_and_mcp_actions.md)."
        )
    if args.a2a_rpc_path and args.a2a_rpc_path.rstrip("/") != A2A_PATH:
        raise SeedFlagRefused(
            f"--a2a-rpc-path {args.a2a_rpc_path} is not supported: A2A JSON-RPC is served at {A2A_PATH} (the agent "
            f"card names it). Drop the flag or pass --a2a-rpc-path {A2A_PATH}, and point peers at the card."
        )


def _public_url_of_resource(resource_url: str) -> str:
    base = resource_url.rstrip("/")
    if not base.endswith(MCP_PATH):
        raise SeedFlagRefused(
            f"--auth-resource-url {resource_url} must end in {MCP_PATH}: the MCP endpoint is "
            f"SAGA_PUBLIC_URL{MCP_PATH}, so the resource URL names it. Pass the URL clients use for MCP, e.g. https://mcp.example.com{MCP_PATH}."
        )
    return base.removesuffix(MCP_PATH) or base
