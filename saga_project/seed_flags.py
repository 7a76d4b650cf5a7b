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
import functools
import importlib.metadata
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

# The seed's own defaults for its list flags: a repeated flag adds to them (argparse's append onto a default list),
# so `--auth-tenant-claim org` meant tenant_id, tid, org_id, org there, and means the same here.
SEED_JWT_ALGORITHMS = ("RS256",)
SEED_TENANT_CLAIMS = ("tenant_id", "tid", "org_id")
# Where our MCP and A2A endpoints are: fixed paths under SAGA_PUBLIC_URL.
MCP_PATH = "/mcp"
A2A_PATH = "/a2a"
# What the seed read as true in its boolean variables (anything else, or unset, was false).
SEED_TRUE = frozenset({"1", "true", "yes"})
# Where the seed's create_text_file wrote without --file-root or SAGA_FILE_ROOT: relative to the current directory.
SEED_FILE_ROOT = "saga-files"

# The seed's own environment variables, read as its flags' defaults (a flag given still wins): (argument dest,
# variable, kind). Variables the seed shares with us under the same name and meaning (SAGA_ACTIONS_FILE,
# SAGA_FILE_ROOT, SAGA_WORKER_ID, SAGA_LEASE_SECONDS, SAGA_AUTH_MODE, SAGA_AUTH_STATIC_TOKENS,
# SAGA_AUTH_REQUIRED_SCOPES, SAGA_POLICY_MODE, SAGA_POLICY_FILE, SAGA_ALLOWED_ORIGINS) are not here: our settings
# read them as they are. docs/configuration.md, "From semantic-saga-mcp", lists both kinds.
SHARED_SEED_VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("database", "SAGA_DATABASE", "str"),
    ("postgres_dsn", "SAGA_POSTGRES_DSN", "str"),
    ("postgres_pool_min", "SAGA_POSTGRES_POOL_MIN", "int"),
    ("postgres_pool_max", "SAGA_POSTGRES_POOL_MAX", "int"),
    ("recovery_limit", "SAGA_RECOVERY_LIMIT", "int"),
    ("auth_issuer", "SAGA_AUTH_ISSUER", "str"),
    ("auth_audience", "SAGA_AUTH_AUDIENCE", "str"),
    ("auth_jwks_url", "SAGA_AUTH_JWKS_URL", "str"),
    ("auth_jwt_algorithm", "SAGA_AUTH_JWT_ALGORITHMS", "list"),
    ("auth_tenant_claim", "SAGA_AUTH_TENANT_CLAIMS", "list"),
    ("auth_roles_claim", "SAGA_AUTH_ROLES_CLAIM", "str"),
    ("auth_principal_type_claim", "SAGA_AUTH_PRINCIPAL_TYPE_CLAIM", "str"),
    ("auth_allow_missing_tenant", "SAGA_AUTH_ALLOW_MISSING_TENANT", "bool"),
    ("policy_opa_url", "SAGA_POLICY_OPA_URL", "str"),
    ("policy_opa_decision_path", "SAGA_POLICY_OPA_DECISION_PATH", "str"),
    ("policy_opa_timeout", "SAGA_POLICY_OPA_TIMEOUT", "float"),
    ("policy_opa_token_env", "SAGA_POLICY_OPA_TOKEN_ENV", "str"),
    ("otel_endpoint", "SAGA_OTEL_ENDPOINT", "str"),
    ("otel_headers", "SAGA_OTEL_HEADERS", "str"),
    ("otel_service_name", "SAGA_OTEL_SERVICE_NAME", "str"),
    ("allow_legacy_action_recovery", "SAGA_ALLOW_LEGACY_ACTION_RECOVERY", "bool"),
    ("dry_run", "SAGA_DRY_RUN", "bool"),
)
MCP_SEED_VARIABLES = (
    *SHARED_SEED_VARIABLES,
    ("transport", "SAGA_TRANSPORT", "transport"),
    ("host", "SAGA_HOST", "str"),
    ("port", "SAGA_PORT", "port"),
    ("allowed_host", "SAGA_ALLOWED_HOSTS", "list"),
    ("auth_resource_url", "SAGA_AUTH_RESOURCE_URL", "str"),
    ("trust_identity_headers", "SAGA_TRUST_IDENTITY_HEADERS", "bool"),
    ("allow_unauthenticated_http", "SAGA_ALLOW_UNAUTHENTICATED_HTTP", "bool"),
)
A2A_SEED_VARIABLES = (
    *SHARED_SEED_VARIABLES,
    ("host", "SAGA_A2A_HOST", "str"),
    ("port", "SAGA_A2A_PORT", "port"),
    ("a2a_public_url", "SAGA_A2A_PUBLIC_URL", "str"),
    ("a2a_rpc_path", "SAGA_A2A_RPC_PATH", "str"),
    ("allow_unauthenticated_a2a", "SAGA_ALLOW_UNAUTHENTICATED_A2A", "bool"),
)
# The seed's transports we serve (its deprecated `sse` is not offered).
TRANSPORTS = ("stdio", "streamable-http")


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


def tcp_port(value: str) -> int:
    """--port's type: a TCP port, 1 to 65535, or argparse's one-line error naming the flag and the range."""
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number: give one from 1 to 65535") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port: give one from 1 to 65535")
    return port


def parse_seed_command(
    parser: argparse.ArgumentParser,
    variables: tuple[tuple[str, str, str], ...],
    argv: list[str] | None = None,
    environ: Mapping[str, str] = os.environ,
) -> argparse.Namespace:
    """Parse `argv` with the seed's variables set in `environ` as the defaults of their flags, as the seed's argparse
    read them, so a flag given still wins. `args.seed_sources` maps each option a variable set (and no flag) to that
    variable, so a refusal names what the user set. A value the seed could not have read either stops the command
    naming the variable (SeedFlagRefused)."""
    defaults: dict[str, object] = {}
    sources: dict[str, str] = {}
    for dest, variable, kind in variables:
        raw = environ.get(variable, "")
        if raw.strip():
            value = _seed_variable_value(variable, raw, kind)
            if value is not None:
                defaults[dest], sources[dest] = value, variable
    parser.set_defaults(**defaults)
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    args.seed_variables_read = frozenset(sources)
    args.seed_flags_given = flags_given(parser, given)
    args.seed_sources = {dest: variable for dest, variable in sources.items() if dest not in args.seed_flags_given}
    # --database and --postgres-dsn exclude each other: a flag given wins over the other's variable.
    if args.database and args.postgres_dsn:
        from_variables = [dest for dest in ("database", "postgres_dsn") if dest in args.seed_sources]
        if len(from_variables) == 2:
            raise SeedFlagRefused(
                "SAGA_DATABASE and SAGA_POSTGRES_DSN are both set: choose SQLite or PostgreSQL, not both (unset one, "
                "or pass --database or --postgres-dsn, which wins)."
            )
        setattr(args, from_variables[0], None)
        del args.seed_sources[from_variables[0]]
    return args


def flags_given(parser: argparse.ArgumentParser, argv: list[str]) -> frozenset[str]:
    """The dests of the options `argv` gives, however spelled: `--auth-mod` is argparse's unambiguous prefix of
    --auth-mode (parsing `argv` has succeeded, so every prefix given names one option), `--port=1` a value joined."""
    options = parser._option_string_actions
    dests = set()
    for arg in argv:
        if arg == "--":
            break
        if not arg.startswith("--"):
            continue
        name = arg.partition("=")[0]
        matching = [options[name]] if name in options else [a for o, a in options.items() if o.startswith(name)]
        if len({id(action) for action in matching}) == 1:
            dests.add(matching[0].dest)
    return frozenset(dests)


def _seed_variable_value(variable: str, raw: str, kind: str) -> object:
    """`raw` read as the seed read `variable`; None for a boolean the seed read as false."""
    if kind == "bool":
        return True if raw.strip().lower() in SEED_TRUE else None
    if kind == "list":
        return [item.strip() for item in raw.split(",") if item.strip()]
    if kind == "port":
        try:
            return tcp_port(raw)
        except argparse.ArgumentTypeError as exc:
            raise SeedFlagRefused(f"{variable} is {raw!r}: {exc}. Fix or unset it.") from None
    if kind in ("int", "float"):
        try:
            return int(raw) if kind == "int" else float(raw)
        except ValueError:
            raise SeedFlagRefused(f"{variable} is {raw!r}, which is not a number ({kind}). Fix or unset it.") from None
    if kind == "transport" and raw not in TRANSPORTS:
        raise SeedFlagRefused(
            f"{variable} is {raw!r}: this command serves {' or '.join(TRANSPORTS)} (the seed's deprecated sse "
            "transport is not offered; use streamable-http)."
        )
    return raw


def given_as(args: argparse.Namespace, dest: str, flag: str) -> str:
    """How the user set `dest`: `flag`, or the seed's variable when that set it and the flag was not given."""
    variable = getattr(args, "seed_sources", {}).get(dest)
    return f"{variable} (the seed's variable for {flag})" if variable else flag


# --- errors in the words the user typed ---------------------------------------------------------------------------

# Each seed flag and the variable of ours it becomes (saga_project.seed_cli._environment and seed_environment): a
# start-up error about a variable names the flag instead (FlagTerms). Two flags may set one variable.
FLAG_VARIABLES: tuple[tuple[str, str], ...] = (
    ("--database", "DATABASE_URL"),
    ("--postgres-dsn", "DATABASE_URL"),
    ("--actions", "SAGA_ACTIONS_FILE"),
    ("--allowed-host", "ALLOWED_HOSTS"),
    ("--policy-mode", "SAGA_POLICY_MODE"),
    ("--policy-file", "SAGA_POLICY_FILE"),
    ("--policy-opa-url", "SAGA_OPA_URL"),
    ("--policy-opa-decision-path", "SAGA_OPA_DECISION_PATH"),
    ("--policy-opa-token-env", "SAGA_OPA_TOKEN_ENV"),
    ("--policy-opa-timeout", "SAGA_OPA_TIMEOUT_SECONDS"),
    ("--worker-id", "SAGA_WORKER_ID"),
    ("--otel-endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ("--otel-headers", "OTEL_EXPORTER_OTLP_HEADERS"),
    ("--otel-service-name", "OTEL_SERVICE_NAME"),
    ("--auth-mode", "SAGA_AUTH_MODE"),
    ("--auth-static-tokens", "SAGA_AUTH_STATIC_TOKENS"),
    ("--auth-issuer", "SAGA_JWT_ISSUER"),
    ("--auth-audience", "SAGA_JWT_AUDIENCE"),
    ("--auth-jwks-url", "SAGA_JWT_JWKS_URL"),
    ("--auth-jwt-algorithm", "SAGA_JWT_ALGORITHMS"),
    ("--auth-tenant-claim", "SAGA_JWT_TENANT_CLAIMS"),
    ("--auth-roles-claim", "SAGA_JWT_ROLES_CLAIM"),
    ("--auth-principal-type-claim", "SAGA_JWT_PRINCIPAL_TYPE_CLAIM"),
    ("--auth-allow-missing-tenant", "SAGA_JWT_ALLOW_MISSING_TENANT"),
    ("--auth-required-scope", "SAGA_AUTH_REQUIRED_SCOPES"),
    ("--auth-resource-url", "SAGA_PUBLIC_URL"),
    ("--a2a-public-url", "SAGA_PUBLIC_URL"),
    ("--allow-unauthenticated-http", "SAGA_ALLOW_UNAUTHENTICATED"),
    ("--allow-unauthenticated-a2a", "SAGA_ALLOW_UNAUTHENTICATED"),
    ("--allowed-origin", "SAGA_ALLOWED_ORIGINS"),
    ("--file-root", "SAGA_FILE_ROOT"),
    ("--lease-seconds", "SAGA_LEASE_SECONDS"),
    ("--recovery-limit", "SAGA_RECOVERY_BATCH"),
    ("--postgres-pool-min", "SAGA_DB_POOL_MIN_SIZE"),
    ("--postgres-pool-max", "SAGA_DB_POOL_MAX_SIZE"),
)
# Flags without a value: `VARIABLE=true` is the flag alone.
SWITCH_FLAGS = frozenset({"--auth-allow-missing-tenant", "--allow-unauthenticated-http", "--allow-unauthenticated-a2a"})
# How a message tells someone to give a setting, said of a flag.
_VERBS = {"Set": "Pass", "set": "pass", "Unset": "Drop", "unset": "drop"}


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class FlagTerms:
    """Our variables as the user of a seed command line gave them, for its start-up errors.

    Calling it on a message rewrites each variable to what set it: the flag typed (`SAGA_AUTH_MODE=static needs
    SAGA_AUTH_STATIC_TOKENS=<path>` becomes `--auth-mode static needs --auth-static-tokens <path>`), the seed's
    variable that stood for the flag, or, for a variable nobody set, the flag that would set it. A variable the user
    set in the environment (or .env), or that the command guessed (SAGA_PUBLIC_URL from --host), keeps its name.
    """

    names: Mapping[str, str] = field(default_factory=dict)  # our variable -> the flag, or the seed's variable

    @classmethod
    def of(cls, args: argparse.Namespace, environ: Mapping[str, str], translated: Mapping[str, str]) -> FlagTerms:
        """`args` as parse_seed_command read it; `environ` before the translation; `translated` what it set."""
        given = getattr(args, "seed_flags_given", None)
        if given is None:  # a namespace parsed without parse_seed_command: the options that hold a value
            given = {dest for dest, value in vars(args).items() if value not in (None, False, [])}
        sources: dict[str, str] = getattr(args, "seed_sources", {})
        candidates: dict[str, list[str]] = {}
        for flag, variable in FLAG_VARIABLES:
            if hasattr(args, _dest(flag)):
                candidates.setdefault(variable, []).append(flag)
        names: dict[str, str] = {}
        for variable, flags in candidates.items():
            typed = [flag for flag in flags if _dest(flag) in given and _dest(flag) not in sources]
            seeded = [(flag, sources[_dest(flag)]) for flag in flags if _dest(flag) in sources]
            if typed:
                names[variable] = typed[0]
            elif seeded:
                names[variable] = seeded[0][1]
            elif len(flags) == 1 and variable not in translated and not environ.get(variable, "").strip():
                names[variable] = flags[0]  # nobody set it: the flag that would
        return cls(names)

    def __call__(self, text: str) -> str:
        for variable, name in self.names.items():
            text = re.sub(_mention(variable), functools.partial(_spelled, name=name), text)
        for name in set(self.names.values()):  # a message that named both: `--x (--x)`, `--x or --x`
            once = re.escape(name)
            text = re.sub(rf"{once} \({once}\)|{once} or {once}(?![\w-])", name, text)
        return text


def _mention(variable: str) -> str:
    """A variable in a message: optionally after a verb telling to set it, optionally with `=value` after it."""
    return rf"(?:\b(?P<verb>{'|'.join(_VERBS)}) )?(?<![\w-]){re.escape(variable)}(?![\w])(?P<equals>=(?:true\b)?)?"


def _spelled(found: re.Match[str], name: str) -> str:
    verb, equals = found["verb"], found["equals"]
    if not name.startswith("--"):  # the seed's variable: the same sentence, its name
        return f"{verb + ' ' if verb else ''}{name}{equals or ''}"
    said = f"{_VERBS[verb]} {name}" if verb else name
    if equals == "=true":
        return said if name in SWITCH_FLAGS else f"{said} true"
    return f"{said} " if equals else said


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
    # The seed's list variables replaced its defaults, and flags added to them: RS256 (or the tenant claims) first
    # only when no variable gave the list.
    read: frozenset[str] = getattr(args, "seed_variables_read", frozenset())
    if args.auth_jwt_algorithm:
        algorithms = () if "auth_jwt_algorithm" in read else SEED_JWT_ALGORITHMS
        env["SAGA_JWT_ALGORITHMS"] = ",".join(dict.fromkeys([*algorithms, *args.auth_jwt_algorithm]))
    if args.auth_tenant_claim:
        claims = () if "auth_tenant_claim" in read else SEED_TENANT_CLAIMS
        env["SAGA_JWT_TENANT_CLAIMS"] = ",".join(dict.fromkeys([*claims, *args.auth_tenant_claim]))
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
        flag = given_as(args, "auth_resource_url", "--auth-resource-url")
        env["SAGA_PUBLIC_URL"] = _public_url_of_resource(args.auth_resource_url, flag)
    if args.allow_legacy_action_recovery:
        out.notes.append(
            f"{given_as(args, 'allow_legacy_action_recovery', '--allow-legacy-action-recovery')} has no effect "
            "here: it let the seed compensate steps journaled before "
            "its 0.5 without a contract snapshot, and every step Semantic Saga journals keeps its contract."
        )
    return out


def _refuse_what_we_cannot_honour(args: argparse.Namespace) -> None:
    if args.trust_identity_headers:
        raise SeedFlagRefused(
            f"{given_as(args, 'trust_identity_headers', '--trust-identity-headers')} is not supported: "
            "Semantic Saga never takes identity from "
            "X-Semantic-Saga-* headers. Have the proxy pass a bearer token instead (--auth-mode jwt with your "
            "identity provider, or --auth-mode static), or keep the proxy authenticating and run with "
            "--allow-unauthenticated-http, where every caller acts as the local admin."
        )
    if args.dry_run:
        raise SeedFlagRefused(
            f"{given_as(args, 'dry_run', '--dry-run')} is not supported: Semantic Saga has no server-wide dry run, "
            "and serving without it would "
            "send real requests. Preview a saga instead: begin_saga with preview: true records what each step would "
            "do and sends nothing (docs/preview_and_mcp_actions.md)."
        )
    if args.a2a_rpc_path and args.a2a_rpc_path.rstrip("/") != A2A_PATH:
        raise SeedFlagRefused(
            f"{given_as(args, 'a2a_rpc_path', '--a2a-rpc-path')} {args.a2a_rpc_path} is not supported: "
            f"A2A JSON-RPC is served at {A2A_PATH} (the agent "
            f"card names it). Drop the flag or pass --a2a-rpc-path {A2A_PATH}, and point peers at the card."
        )


def _public_url_of_resource(resource_url: str, flag: str = "--auth-resource-url") -> str:
    base = resource_url.rstrip("/")
    if not base.endswith(MCP_PATH):
        raise SeedFlagRefused(
            f"{flag} {resource_url} must end in {MCP_PATH}: the MCP endpoint is "
            f"SAGA_PUBLIC_URL{MCP_PATH}, so the resource URL names it. Pass the URL clients use for MCP, e.g. https://mcp.example.com{MCP_PATH}."
        )
    return base.removesuffix(MCP_PATH) or base
