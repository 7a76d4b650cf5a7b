"""Settings for Semantic Saga, read once from the environment (django-environ).

Every variable is documented in docs/configuration.md. A malformed value raises ImproperlyConfigured at start-up
instead of surfacing later as a confusing runtime error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from saga_project import home
from saga_project.database import configure_postgresql
from saga_project.environment import SettingsEnv, load_dotenv

BASE_DIR = Path(__file__).resolve().parent.parent

env = SettingsEnv()
# A local .env (written by `make run` with a generated SECRET_KEY) is read when present; real environment
# variables win over it. Relative paths in it are relative to BASE_DIR, wherever the process starts.
load_dotenv(BASE_DIR / ".env")

# No DATABASE_URL (in the environment or .env): a local install with nothing configured. The embedded database,
# a generated secret key and the other files live in the per-user home (SAGA_HOME, else the platform's user data
# directory), found from any directory; the console script creates and migrates it on first use (saga_project.home).
SAGA_HOME: Path = home.home_directory()
SAGA_USES_HOME: bool = not env.str("DATABASE_URL", default="")

# --- core -------------------------------------------------------------------------------------------------------

DEBUG: bool = env.bool("DEBUG", default=False)
SECRET_KEY: str = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if DEBUG:
        SECRET_KEY = "insecure-development-only-key"
    elif SAGA_USES_HOME:
        SECRET_KEY = home.secret_key(SAGA_HOME)  # generated once, kept in the home beside the database
    else:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY to a long random string (or DEBUG=true for local development); "
            "`make run` writes one into .env for you. (Without DATABASE_URL, one is generated in SAGA_HOME.)"
        )

ALLOWED_HOSTS: list[str] = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS: list[str] = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    # django.contrib.admin as the operator console (sagas.console.site.ConsoleAdminSite: dashboard, screens).
    "sagas.console.apps.ConsoleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc assets served locally (no CDN)
    # Always installed (it has no models): operator login switches on with the OIDC_* values below.
    "mozilla_django_oidc",
    "audit",
    "registry",
    "governance",
    "sagas",
    # The project itself (no models): registers the project-wide start-up checks (saga_project.checks).
    "saga_project.apps.ProjectConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "saga_project.urls"
ASGI_APPLICATION = "saga_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Inside the package, so an installed wheel has them too; before the apps' own (the admin's) so ours win.
        "DIRS": [BASE_DIR / "saga_project" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# `semantic-saga collectstatic` fills it (`make run` does); a local install's first `serve` does (saga_project.cli).
STATIC_ROOT = env.path("STATIC_ROOT", default=str((SAGA_HOME if SAGA_USES_HOME else BASE_DIR) / "staticfiles"))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- database ---------------------------------------------------------------------------------------------------

# DATABASE_URL: a SQLite file or PostgreSQL. Unset: the embedded SQLite file in the per-user home (SAGA_HOME above).
DATABASES: dict[str, dict[str, Any]] = {
    "default": (
        {"ENGINE": "django.db.backends.sqlite3", "NAME": str(SAGA_HOME / home.DATABASE_FILE)}
        if SAGA_USES_HOME
        else env.db_url("DATABASE_URL")
    )
}
_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db["OPTIONS"] = {
        # WAL lets readers run beside the single writer; IMMEDIATE takes the write lock at BEGIN so two writers
        # queue on the busy timeout instead of failing with "database is locked" on lock upgrade.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
        "transaction_mode": "IMMEDIATE",
        "timeout": env.int("SAGA_SQLITE_TIMEOUT_SECONDS", default=30),
        **_db.get("OPTIONS", {}),
    }
    # Each long-lived thread (the ORM pool's, the executor's) keeps its SQLite connection: opening one and running
    # the PRAGMAs cost more than a whole read. CONN_MAX_AGE=0 closes it after every unit again.
    _db.setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=None))
    # Tests need a file (not :memory:) so that executor threads and subprocesses share one database.
    if env.str("SAGA_TEST_SQLITE_PATH", default=""):
        _db["TEST"] = {"NAME": env.str("SAGA_TEST_SQLITE_PATH")}
else:
    # The connection pool (SAGA_DB_POOL_*), or PgBouncer transaction mode (SAGA_PGBOUNCER): saga_project.database.
    configure_postgresql(_db, env)

# create_text_file's files and ownership records are flushed to disk (fsync) where the journal's commits are
# (PostgreSQL), and left to the OS where a commit survives the process but not a power loss (SQLite in WAL with
# synchronous=NORMAL). After a power loss the two may then disagree; the undo refuses rather than guesses
# (docs/configuration.md, SAGA_FILE_FSYNC).
SAGA_FILE_FSYNC: bool = env.bool("SAGA_FILE_FSYNC", default=_db["ENGINE"] != "django.db.backends.sqlite3")

# --- saga engine ------------------------------------------------------------------------------------------------

# Registry file loaded at start-up (serve, workers); empty = load with `semantic-saga load_actions FILE`.
SAGA_ACTIONS_FILE: str = env.str("SAGA_ACTIONS_FILE", default="")
# Directory below which the builtin create_text_file action may create files.
# Unset: BASE_DIR/saga-files in a source checkout with DATABASE_URL, else SAGA_HOME/saga-files (never inside an
# installed package); docs/configuration.md says relative to what.
SAGA_FILE_ROOT: str = env.str(
    "SAGA_FILE_ROOT", default=str(home.default_file_root(BASE_DIR, SAGA_HOME, uses_home=SAGA_USES_HOME))
)
# PostgreSQL: a coordinator transaction's row writes travel with its next read, the last ones just before its COMMIT
# (sagas.coordinator.sql.pipeline).
SAGA_PG_PIPELINE: bool = env.bool("SAGA_PG_PIPELINE", default=True)
# A node lease lasts this long without a heartbeat; shorter finds dead workers sooner, longer tolerates GC pauses.
# Seconds, fractions allowed (semantic-saga-mcp's --lease-seconds is a float); at least MIN_LEASE_SECONDS.
SAGA_LEASE_SECONDS: float = env.float("SAGA_LEASE_SECONDS", default=30.0)
# Renewals come every third of the lease (at least every 0.5 s) and a completion record retries for about 0.75 s
# on a lost connection (sagas.coordinator.execution.record_retry): at 2 s a lease survives one missed renewal plus a
# full retry; below that one slow write would let a live worker's lease lapse. semantic-saga-mcp's CI runs with 2.
MIN_LEASE_SECONDS = 2.0
# Sagas the recovery sweep takes per category per pass (semantic-saga-mcp's --recovery-limit); the next pass
# continues. Larger passes recover a backlog sooner; smaller ones keep each pass short.
SAGA_RECOVERY_BATCH: int = env.int("SAGA_RECOVERY_BATCH", default=100)
# Threads of the embedded in-process executor (independent ready nodes run concurrently up to this many).
SAGA_EXECUTOR_THREADS: int = env.int("SAGA_EXECUTOR_THREADS", default=8)
# Threads per process (Celery workers too) that run ready nodes claimed in a finishing node's own commit
# (sagas.coordinator.execution.fan_out); ready nodes beyond them are nudged to other workers. 0 = nudge every one.
SAGA_FAN_OUT_THREADS: int = env.int("SAGA_FAN_OUT_THREADS", default=16)
# Threads that run MCP and A2A handlers' database work (sagas.protocols.orm): kept for the life of the process,
# started only as concurrent calls need them. A call that waits for its nodes (run_ready_steps) holds one meanwhile.
SAGA_ORM_THREADS: int = env.int("SAGA_ORM_THREADS", default=32)
# The largest request body /mcp, /proxy/mcp and /a2a accept (bytes); bigger ones are refused before they are read.
SAGA_MAX_REQUEST_BYTES: int = env.int("SAGA_MAX_REQUEST_BYTES", default=1024 * 1024)
# The largest A2A message metadata kept with a task (bytes of its JSON); a command carrying more is refused.
SAGA_A2A_MAX_METADATA_BYTES: int = env.int("SAGA_A2A_MAX_METADATA_BYTES", default=16 * 1024)
# How deep an operation's JSON arguments (metadata, input, checkpoint data) may nest; deeper ones are refused.
SAGA_MAX_ARGUMENT_DEPTH: int = env.int("SAGA_MAX_ARGUMENT_DEPTH", default=32)
# The longest string (UTF-8 bytes) anywhere in an operation's JSON arguments; a longer one is refused.
SAGA_MAX_ARGUMENT_STRING_BYTES: int = env.int("SAGA_MAX_ARGUMENT_STRING_BYTES", default=64 * 1024)
# The largest answer of a registered action's call kept as its step's result (bytes); a bigger one fails the attempt.
SAGA_MAX_ACTION_RESULT_BYTES: int = env.int("SAGA_MAX_ACTION_RESULT_BYTES", default=1024 * 1024)
# Messages an A2A task keeps in its history (the command it was created from and the newest ones).
SAGA_A2A_MAX_TASK_HISTORY: int = env.int("SAGA_A2A_MAX_TASK_HISTORY", default=100)
# Quotas (0 = none): sagas one principal may begin per minute; sagas of a tenant running nodes at once.
SAGA_MAX_NEW_SAGAS_PER_MINUTE: int = env.int("SAGA_MAX_NEW_SAGAS_PER_MINUTE", default=0)
SAGA_MAX_CONCURRENT_RUNS_PER_TENANT: int = env.int("SAGA_MAX_CONCURRENT_RUNS_PER_TENANT", default=0)
# Identity of this process in lease_owner columns.
SAGA_WORKER_ID: str = env.str("SAGA_WORKER_ID", default="")
SAGA_PUBLIC_URL: str = env.str("SAGA_PUBLIC_URL", default="http://127.0.0.1:8000")
# Browser origins allowed to call /mcp (DNS-rebinding protection); empty = loopback origins and SAGA_PUBLIC_URL's.
SAGA_ALLOWED_ORIGINS: list[str] = env.list("SAGA_ALLOWED_ORIGINS", default=[])
# A proxy configuration file: when set, `serve` also serves the MCP proxy at /proxy/mcp (sagas.protocols.proxy).
SAGA_PROXY_CONFIG: str = env.str("SAGA_PROXY_CONFIG", default="")
# A stateless (2026-07-28) proxy client's session saga ends after this many seconds without a call.
SAGA_PROXY_SESSION_IDLE_SECONDS: int = env.int("SAGA_PROXY_SESSION_IDLE_SECONDS", default=1800)
# The largest downstream answer the proxy passes on to an agent (bytes); past it the agent is told, and nothing more
# of it is read.
SAGA_PROXY_MAX_RESULT_BYTES: int = env.int("SAGA_PROXY_MAX_RESULT_BYTES", default=8 * 1024 * 1024)
# How long a proxied call may wait for its downstream's answer (a server's `timeoutMs` overrides it).
SAGA_PROXY_CALL_TIMEOUT_SECONDS: float = env.float("SAGA_PROXY_CALL_TIMEOUT_SECONDS", default=300.0)
# How long the proxy waits for a downstream to connect and answer initialize (a server's `connectTimeoutMs`).
SAGA_PROXY_CONNECT_TIMEOUT_SECONDS: float = env.float("SAGA_PROXY_CONNECT_TIMEOUT_SECONDS", default=10.0)
# Calls of one principal (over all its proxy sessions) that may wait for a decision at once; the next is refused.
SAGA_PROXY_MAX_HELD_CALLS: int = env.int("SAGA_PROXY_MAX_HELD_CALLS", default=20)
# A tool listing older than this is listed again before a non-read call is forwarded (0 = before every one).
SAGA_PROXY_RELIST_SECONDS: float = env.float("SAGA_PROXY_RELIST_SECONDS", default=60.0)
# How a downstream server's first listing is trusted when its configuration does not say (`trust`): "first-use",
# "review", or "" (first-use for the stdio proxy, where the agent is the local operator's; review over HTTP).
SAGA_PROXY_TRUST: str = env.str("SAGA_PROXY_TRUST", default="")
# The stdio proxy answers plain allowed calls on its fast path (sagas.protocols.proxy.fast_calls); false sends every
# call through the SDK's sessions (to compare the two, or to rule the fast path out).
SAGA_PROXY_FAST_PATH: bool = env.bool("SAGA_PROXY_FAST_PATH", default=True)

if SAGA_PROXY_SESSION_IDLE_SECONDS < 1:
    raise ImproperlyConfigured(
        f"SAGA_PROXY_SESSION_IDLE_SECONDS must be at least 1 (got {SAGA_PROXY_SESSION_IDLE_SECONDS})."
    )
if not 64 * 1024 <= SAGA_PROXY_MAX_RESULT_BYTES <= 256 * 1024 * 1024:
    raise ImproperlyConfigured(
        f"SAGA_PROXY_MAX_RESULT_BYTES must be between 65536 (64 KiB) and 268435456 (256 MiB) "
        f"(got {SAGA_PROXY_MAX_RESULT_BYTES})."
    )
for _timeout, _seconds, _low, _high in (
    ("SAGA_PROXY_CALL_TIMEOUT_SECONDS", SAGA_PROXY_CALL_TIMEOUT_SECONDS, 0.1, 86_400.0),
    ("SAGA_PROXY_CONNECT_TIMEOUT_SECONDS", SAGA_PROXY_CONNECT_TIMEOUT_SECONDS, 0.1, 600.0),
    ("SAGA_PROXY_RELIST_SECONDS", SAGA_PROXY_RELIST_SECONDS, 0.0, 86_400.0),
):
    if not _low <= _seconds <= _high:
        raise ImproperlyConfigured(f"{_timeout} must be between {_low:g} and {_high:g} seconds (got {_seconds:g}).")
if SAGA_PROXY_TRUST not in ("", "first-use", "review"):
    raise ImproperlyConfigured(
        f"SAGA_PROXY_TRUST must be first-use or review, or unset for the default (got {SAGA_PROXY_TRUST!r})."
    )
if not 1 <= SAGA_PROXY_MAX_HELD_CALLS <= 10_000:
    raise ImproperlyConfigured(
        f"SAGA_PROXY_MAX_HELD_CALLS must be between 1 and 10000 (got {SAGA_PROXY_MAX_HELD_CALLS})."
    )
if SAGA_LEASE_SECONDS < MIN_LEASE_SECONDS:
    raise ImproperlyConfigured(
        f"SAGA_LEASE_SECONDS must be at least {MIN_LEASE_SECONDS:g} (got {SAGA_LEASE_SECONDS:g}): renewals every "
        "third of it could not keep a running step's lease alive through one slow database write. Use 2 or more."
    )
if not 1 <= SAGA_RECOVERY_BATCH <= 100_000:
    raise ImproperlyConfigured(f"SAGA_RECOVERY_BATCH must be between 1 and 100000 (got {SAGA_RECOVERY_BATCH}).")
if not 1 <= SAGA_EXECUTOR_THREADS <= 256:
    raise ImproperlyConfigured(f"SAGA_EXECUTOR_THREADS must be between 1 and 256 (got {SAGA_EXECUTOR_THREADS}).")
if not 1 <= SAGA_ORM_THREADS <= 1024:
    raise ImproperlyConfigured(f"SAGA_ORM_THREADS must be between 1 and 1024 (got {SAGA_ORM_THREADS}).")
if not 1024 <= SAGA_MAX_REQUEST_BYTES <= 64 * 1024 * 1024:
    raise ImproperlyConfigured(
        f"SAGA_MAX_REQUEST_BYTES must be between 1024 and 67108864 (64 MiB) (got {SAGA_MAX_REQUEST_BYTES})."
    )
if not 0 <= SAGA_A2A_MAX_METADATA_BYTES <= SAGA_MAX_REQUEST_BYTES:
    raise ImproperlyConfigured(
        f"SAGA_A2A_MAX_METADATA_BYTES must be between 0 and SAGA_MAX_REQUEST_BYTES ({SAGA_MAX_REQUEST_BYTES}) "
        f"(got {SAGA_A2A_MAX_METADATA_BYTES})."
    )
# Above 128 levels, a stored value wrapped in an answer passes what JSON parsers (pydantic's among them) accept.
if not 2 <= SAGA_MAX_ARGUMENT_DEPTH <= 128:
    raise ImproperlyConfigured(f"SAGA_MAX_ARGUMENT_DEPTH must be between 2 and 128 (got {SAGA_MAX_ARGUMENT_DEPTH}).")
# Sizes between 1 KiB and 64 MiB: below, ordinary arguments and answers would not fit; above, one value could hold
# more than any request body may carry (SAGA_MAX_REQUEST_BYTES' own ceiling).
for _size, _value in (
    ("SAGA_MAX_ARGUMENT_STRING_BYTES", SAGA_MAX_ARGUMENT_STRING_BYTES),
    ("SAGA_MAX_ACTION_RESULT_BYTES", SAGA_MAX_ACTION_RESULT_BYTES),
):
    if not 1024 <= _value <= 64 * 1024 * 1024:
        raise ImproperlyConfigured(f"{_size} must be between 1024 and 67108864 (64 MiB) (got {_value}).")
# At least the command a task was created from and its latest message.
if not 2 <= SAGA_A2A_MAX_TASK_HISTORY <= 10_000:
    raise ImproperlyConfigured(
        f"SAGA_A2A_MAX_TASK_HISTORY must be between 2 and 10000 (got {SAGA_A2A_MAX_TASK_HISTORY})."
    )
for _quota, _value in (
    ("SAGA_MAX_NEW_SAGAS_PER_MINUTE", SAGA_MAX_NEW_SAGAS_PER_MINUTE),
    ("SAGA_MAX_CONCURRENT_RUNS_PER_TENANT", SAGA_MAX_CONCURRENT_RUNS_PER_TENANT),
):
    if not 0 <= _value <= 1_000_000:
        raise ImproperlyConfigured(f"{_quota} must be between 0 (no quota) and 1000000 (got {_value}).")
if not 0 <= SAGA_FAN_OUT_THREADS <= 256:
    raise ImproperlyConfigured(
        f"SAGA_FAN_OUT_THREADS must be between 0 (nudge every ready node) and 256 (got {SAGA_FAN_OUT_THREADS})."
    )

# --- identity ---------------------------------------------------------------------------------------------------

# none: no tokens (loopback only, unless SAGA_ALLOW_UNAUTHENTICATED); static: a JSON token file; jwt: OAuth/OIDC.
SAGA_AUTH_MODE: str = env.str("SAGA_AUTH_MODE", default="none")
SAGA_ALLOW_UNAUTHENTICATED: bool = env.bool("SAGA_ALLOW_UNAUTHENTICATED", default=False)
SAGA_DEFAULT_TENANT: str = env.str("SAGA_DEFAULT_TENANT", default="default")
SAGA_AUTH_STATIC_TOKENS: str = env.str("SAGA_AUTH_STATIC_TOKENS", default="")
SAGA_JWT_ISSUER: str = env.str("SAGA_JWT_ISSUER", default="")
SAGA_JWT_AUDIENCE: str = env.str("SAGA_JWT_AUDIENCE", default="")
SAGA_JWT_JWKS_URL: str = env.str("SAGA_JWT_JWKS_URL", default="")
SAGA_JWT_ALGORITHMS: list[str] = env.list("SAGA_JWT_ALGORITHMS", default=["RS256", "ES256"])
SAGA_JWT_TENANT_CLAIMS: list[str] = env.list("SAGA_JWT_TENANT_CLAIMS", default=["tenant_id", "tid", "org_id"])
SAGA_JWT_ROLES_CLAIM: str = env.str("SAGA_JWT_ROLES_CLAIM", default="roles")
SAGA_JWT_PRINCIPAL_TYPE_CLAIM: str = env.str("SAGA_JWT_PRINCIPAL_TYPE_CLAIM", default="principal_type")
SAGA_JWT_ALLOW_MISSING_TENANT: bool = env.bool("SAGA_JWT_ALLOW_MISSING_TENANT", default=False)
# Scopes every token must carry (semantic-saga-mcp's --auth-required-scope), checked before RBAC; empty = none.
SAGA_AUTH_REQUIRED_SCOPES: list[str] = env.list("SAGA_AUTH_REQUIRED_SCOPES", default=[])
# Clock skew tolerated on exp/nbf/iat; a larger value keeps revoked-by-expiry tokens alive longer.
SAGA_JWT_LEEWAY_SECONDS: int = env.int("SAGA_JWT_LEEWAY_SECONDS", default=30)
# JWKS kept this long; an unknown kid refetches at most once per SAGA_JWKS_MIN_REFRESH_SECONDS (key rotation
# is picked up at once, while a flood of made-up kids cannot turn into a flood of fetches).
SAGA_JWKS_CACHE_SECONDS: int = env.int("SAGA_JWKS_CACHE_SECONDS", default=300)
SAGA_JWKS_MIN_REFRESH_SECONDS: float = env.float("SAGA_JWKS_MIN_REFRESH_SECONDS", default=10.0)

if SAGA_AUTH_MODE not in ("none", "static", "jwt"):
    raise ImproperlyConfigured(f"SAGA_AUTH_MODE must be none, static or jwt (got {SAGA_AUTH_MODE!r}).")
if SAGA_AUTH_MODE == "static" and not SAGA_AUTH_STATIC_TOKENS:
    raise ImproperlyConfigured("SAGA_AUTH_MODE=static needs SAGA_AUTH_STATIC_TOKENS=<path to the token file>.")
_jwt_required = {
    "SAGA_JWT_ISSUER": SAGA_JWT_ISSUER,
    "SAGA_JWT_AUDIENCE": SAGA_JWT_AUDIENCE,
    "SAGA_JWT_JWKS_URL": SAGA_JWT_JWKS_URL,
}
if SAGA_AUTH_MODE == "jwt" and (_jwt_missing := [name for name, value in _jwt_required.items() if not value]):
    raise ImproperlyConfigured(
        f"SAGA_AUTH_MODE=jwt needs SAGA_JWT_ISSUER, SAGA_JWT_AUDIENCE and SAGA_JWT_JWKS_URL; {', '.join(_jwt_missing)} "
        "not set. Set them to your identity provider's issuer, this server's audience and the issuer's JWKS URL "
        "(docs/identity.md)."
    )
_weak = [a for a in SAGA_JWT_ALGORITHMS if a.lower() == "none" or a.upper().startswith("HS")]
if _weak:
    raise ImproperlyConfigured(
        f"SAGA_JWT_ALGORITHMS must not include {', '.join(_weak)}: only asymmetric algorithms (RS*, PS*, ES*, EdDSA) "
        "are verified against the issuer's published keys."
    )

# --- operator login (OIDC) -------------------------------------------------------------------------------------

# Operators log into the admin through the organisation's identity provider (authorization code flow). The
# backend and the /oidc/ URLs are always installed and stay inert (404, no login) until every required value is
# set; Django username/password accounts keep working either way.
OIDC_RP_CLIENT_ID: str = env.str("OIDC_RP_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET: str = env.str("OIDC_RP_CLIENT_SECRET", default="")
OIDC_OP_AUTHORIZATION_ENDPOINT: str = env.str("OIDC_OP_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT: str = env.str("OIDC_OP_TOKEN_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT: str = env.str("OIDC_OP_USER_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT: str = env.str("OIDC_OP_JWKS_ENDPOINT", default="")
# Empty = any issuer whose id_token verifies against the JWKS; set it to pin the exact `iss`.
OIDC_OP_ISSUER: str = env.str("OIDC_OP_ISSUER", default="")
OIDC_RP_SIGN_ALGO: str = env.str("OIDC_RP_SIGN_ALGO", default="RS256")
OIDC_RP_SCOPES: str = env.str("OIDC_RP_SCOPES", default="openid email profile")
# PKCE binds the authorization code to this browser session; turn it off only for a provider that rejects it.
OIDC_USE_PKCE: bool = env.bool("OIDC_USE_PKCE", default=True)
# The role of an operator whose claims name none of viewer, operator, admin.
SAGA_OIDC_DEFAULT_ROLE: str = env.str("SAGA_OIDC_DEFAULT_ROLE", default="viewer")
# mozilla-django-oidc waits forever by default; a slow provider must not hold a login request hostage.
OIDC_TIMEOUT = 5
# The views are our subclasses: they answer 404 while OIDC is not configured instead of redirecting nowhere.
OIDC_AUTHENTICATE_CLASS = "governance.identity.oidc.OperatorOIDCAuthenticateView"
OIDC_CALLBACK_CLASS = "governance.identity.oidc.OperatorOIDCCallbackView"
LOGIN_REDIRECT_URL = "/admin/"
LOGIN_REDIRECT_URL_FAILURE = "/admin/login/"  # the refusal reason is shown there as a message
LOGOUT_REDIRECT_URL = "/admin/login/"
# Always listed: the OIDC backend does nothing (returns None) while SAGA_OIDC_ENABLED is false.
AUTHENTICATION_BACKENDS = ["governance.identity.oidc.OperatorOIDCBackend", "django.contrib.auth.backends.ModelBackend"]

_oidc_required = {
    "OIDC_RP_CLIENT_ID": OIDC_RP_CLIENT_ID,
    "OIDC_OP_AUTHORIZATION_ENDPOINT": OIDC_OP_AUTHORIZATION_ENDPOINT,
    "OIDC_OP_TOKEN_ENDPOINT": OIDC_OP_TOKEN_ENDPOINT,
    "OIDC_OP_USER_ENDPOINT": OIDC_OP_USER_ENDPOINT,
    "OIDC_OP_JWKS_ENDPOINT": OIDC_OP_JWKS_ENDPOINT,
}
_oidc_missing = [name for name, value in _oidc_required.items() if not value]
SAGA_OIDC_ENABLED: bool = not _oidc_missing
# A secret or issuer alone also signals intent: half a configuration would silently fall back to passwords.
if _oidc_missing and (len(_oidc_missing) < len(_oidc_required) or OIDC_RP_CLIENT_SECRET or OIDC_OP_ISSUER):
    raise ImproperlyConfigured(
        f"Operator login with OIDC is partially configured: set {', '.join(_oidc_missing)} as well "
        "(or unset all OIDC_* variables to use Django accounts only)."
    )
if SAGA_OIDC_DEFAULT_ROLE not in ("viewer", "operator", "admin"):
    raise ImproperlyConfigured(
        f"SAGA_OIDC_DEFAULT_ROLE must be viewer, operator or admin (got {SAGA_OIDC_DEFAULT_ROLE!r})."
    )

# --- A2A --------------------------------------------------------------------------------------------------------

# The agent card (public) is served from SAGA_PUBLIC_URL: its JSON-RPC interface is {SAGA_PUBLIC_URL}/a2a.
# Peers may cache the card this long; longer saves requests, shorter spreads a changed card (a new public URL,
# auth mode or version) sooner. Revalidation is cheap either way: the card carries an ETag and answers 304.
SAGA_A2A_CARD_MAX_AGE_SECONDS: int = env.int("SAGA_A2A_CARD_MAX_AGE_SECONDS", default=300)

if SAGA_A2A_CARD_MAX_AGE_SECONDS < 0:
    raise ImproperlyConfigured(
        f"SAGA_A2A_CARD_MAX_AGE_SECONDS must be 0 or more (got {SAGA_A2A_CARD_MAX_AGE_SECONDS})."
    )

# --- REST API (/api/v1, docs/rest_api.md) ------------------------------------------------------------------------

# Bearer tokens as on /mcp and /a2a, or a logged-in console session (CSRF enforced); JSON bodies only, so a
# cross-site form post cannot reach a view. Errors go through one handler: {"error": {"code", "message"}}.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "sagas.api.authentication.BearerTokenAuthentication",
        "sagas.api.authentication.ConsoleSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["sagas.api.authentication.PrincipalRequired"],
    "DEFAULT_PARSER_CLASSES": ["sagas.api.parsers.DepthSafeJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "EXCEPTION_HANDLER": "sagas.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Semantic Saga REST API",
    "DESCRIPTION": "Durable, governed sagas for agent workflows: the same operations, rules and result shapes as "
    "the MCP tools and A2A operations. See docs/rest_api.md.",
    "VERSION": "1.0.0",
    # 3.1: the response schemas are the MCP tools' JSON Schemas (nullable written as type: [..., "null"]).
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": False,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "sagas.api.schema.add_components"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- governance -------------------------------------------------------------------------------------------------

# none: no business policy (the default; upgrading never silently restricts); json: SAGA_POLICY_FILE (JSON);
# rego: SAGA_POLICY_FILE (Rego, evaluated in-process); opa: an OPA server at SAGA_OPA_URL.
SAGA_POLICY_MODE: str = env.str("SAGA_POLICY_MODE", default="none")
SAGA_POLICY_FILE: str = env.str("SAGA_POLICY_FILE", default="")
SAGA_OPA_URL: str = env.str("SAGA_OPA_URL", default="")
SAGA_OPA_DECISION_PATH: str = env.str("SAGA_OPA_DECISION_PATH", default="semantic_saga/decision")
# Name of the environment variable holding OPA's bearer token (the token itself never sits in settings).
SAGA_OPA_TOKEN_ENV: str = env.str("SAGA_OPA_TOKEN_ENV", default="")
# OPA is asked before side effects; a slow answer delays them, no answer fails closed after this long.
SAGA_OPA_TIMEOUT_SECONDS: float = env.float("SAGA_OPA_TIMEOUT_SECONDS", default=2.0)
# An approval request not decided within this many seconds counts as rejected (0 = requests never expire).
SAGA_APPROVAL_TTL_SECONDS: int = env.int("SAGA_APPROVAL_TTL_SECONDS", default=0)
# Whoever planned a node may not approve it (the four-eyes rule).
SAGA_APPROVAL_SEPARATION_OF_DUTIES: bool = env.bool("SAGA_APPROVAL_SEPARATION_OF_DUTIES", default=False)
if SAGA_APPROVAL_TTL_SECONDS < 0:
    raise ImproperlyConfigured(f"SAGA_APPROVAL_TTL_SECONDS must be 0 or more (got {SAGA_APPROVAL_TTL_SECONDS}).")
if SAGA_POLICY_MODE not in ("none", "json", "rego", "opa"):
    raise ImproperlyConfigured(f"SAGA_POLICY_MODE must be none, json, rego or opa (got {SAGA_POLICY_MODE!r}).")
if SAGA_POLICY_MODE in ("json", "rego") and not SAGA_POLICY_FILE:
    raise ImproperlyConfigured(f"SAGA_POLICY_MODE={SAGA_POLICY_MODE} needs SAGA_POLICY_FILE=<path to the policy file>.")
if SAGA_POLICY_MODE == "opa" and not SAGA_OPA_URL:
    raise ImproperlyConfigured("SAGA_POLICY_MODE=opa needs SAGA_OPA_URL (e.g. http://127.0.0.1:8181).")

# --- Celery and beat ---------------------------------------------------------------------------------------------

# Unset = the embedded in-process executor (one process, no broker). Set (redis://127.0.0.1:6379/0) = ready nodes
# are nudged to `celery -A saga_project worker` processes; run `celery -A saga_project beat` for the sweeper.
CELERY_BROKER_URL: str = env.str("CELERY_BROKER_URL", default="")
CELERY_TASK_ACKS_LATE = True  # a message is acknowledged after the task ran: a killed worker's nudge is redelivered
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # long actions must not hold nudges other workers could run now
CELERY_TASK_IGNORE_RESULT = True  # state lives in the database; there is no result backend
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A nudge that cannot be published within about a second is dropped and logged: the sweeper re-sends it, and a
# request must not hang on a broker outage.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2, "interval_max": 0.5}
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 1, "socket_timeout": 5}
# Seconds between recovery sweeps (beat in Celery mode, a thread in embedded serve).
SAGA_SWEEP_INTERVAL_SECONDS: float = env.float("SAGA_SWEEP_INTERVAL_SECONDS", default=5.0)
CELERY_BEAT_SCHEDULE = {
    # Every few seconds (SAGA_SWEEP_INTERVAL_SECONDS): reclaim expired leases, resume rollbacks, re-send lost nudges.
    # A sweep not started within one interval is dropped (expires): the next one covers the same ground.
    "sagas-recover-stale": {
        "task": "sagas.tasks.sagas_recover_task",
        "schedule": SAGA_SWEEP_INTERVAL_SECONDS,
        "options": {"expires": SAGA_SWEEP_INTERVAL_SECONDS},
    },
}

# --- logging ----------------------------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"kv": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "kv"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}
