"""One settings module, read from the environment.

Unset DATABASE_URL and REDIS_URL give the embedded default: a SQLite file, the in-memory
channel layer and an in-memory Celery broker served by a worker inside the server process.
Setting them gives production: Postgres holds the log, Redis carries tasks and fan-out.
"""

import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

# LiteLLM otherwise downloads its price table at import time; the packaged copy is enough.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CANVAS_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = _env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    # The fallback is public (it is in this file): fine for a local SQLite demo, never for a
    # server whose sessions, CSRF tokens and derived secret keys others could then forge.
    if os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL"):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Outside the embedded mode (DATABASE_URL or REDIS_URL set) "
            "the server refuses to start without it: export SECRET_KEY to a long random value, "
            'e.g. python -c "import secrets; print(secrets.token_urlsafe(50))".'
        )
    SECRET_KEY = "insecure-embedded-default-change-me"
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "ninja",  # serves the API docs page from local static files, not a CDN
    "template_partials",
    "teams",
    "conversations",
    "workspaces",
    "orchestration",
    "acp_bridge",
    "automations",
    "skills",
    "canvas",
    "axes",  # login lock-outs (see "Throttling" below)
]

MIDDLEWARE = [
    # First: an error any later layer answers under /api/ leaves as JSON (canvas.api.middleware).
    "canvas.api.middleware.ApiJsonErrorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",  # CONTENT_SECURITY_POLICY below
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "canvas.outbound.OutboundRequestMiddleware",  # error texts redacted for this request's user
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last: turns a login refused for a lock-out into the 429 page (canvas.auth_views).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "canvas.urls"
ASGI_APPLICATION = "canvas.asgi.application"
WSGI_APPLICATION = "canvas.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "canvas.team_context.context_processor",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    from common.db_pool import pool_max, pool_options  # noqa: E402 - pure

    # Each process borrows from one psycopg pool of at most CANVAS_DB_POOL_MAX connections
    # (default: worker slots + keepers + 1; docs/deploy.md "Database connections"); a thread
    # waits up to CANVAS_DB_POOL_TIMEOUT seconds for one. 0 turns pooling off: Django's own
    # connection per thread, kept 60 s (uncapped; under ASGI each request thread keeps one).
    CANVAS_DB_POOL_MAX = int(
        os.environ.get("CANVAS_DB_POOL_MAX")
        or pool_max(int(os.environ.get("CANVAS_WORKER_CONCURRENCY") or 32))
    )
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL,
            conn_max_age=0 if CANVAS_DB_POOL_MAX else 60,  # pooled: back to the pool at close
            conn_health_checks=True,  # a connection a restart cut is replaced, not lent
        )
    }
    # An unreachable host fails in seconds (503, canvas/outage.py) instead of hanging; a
    # ?connect_timeout= in DATABASE_URL wins.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
    if CANVAS_DB_POOL_MAX:
        DATABASES["default"]["OPTIONS"]["pool"] = pool_options(
            CANVAS_DB_POOL_MAX, timeout=float(os.environ.get("CANVAS_DB_POOL_TIMEOUT", "5"))
        )
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "canvas.sqlite3",
            # IMMEDIATE takes the write lock at BEGIN, so concurrent appenders queue instead of
            # failing with "database is locked" when a reader upgrades to a writer.
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# On Postgres an event append is one statement (conversations/store_postgres.py); off, it takes
# the portable ORM path other databases use (the store tests run both).
CANVAS_STORE_FAST_PATH = _env_bool("CANVAS_STORE_FAST_PATH", True)

# Event appends run as prepared statements (conversations/store_postgres.py); off behind a
# transaction-mode pooler that cannot carry them (PgBouncer before 1.21). The ORM's own
# cursors bind on the client and never prepare, whatever the threshold.
CANVAS_PREPARED_APPEND = _env_bool("CANVAS_PREPARED_APPEND", True)
if CANVAS_PREPARED_APPEND and "postgresql" in DATABASES["default"]["ENGINE"]:
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 5

# --- Redis: broker and channel layer --------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
EMBEDDED = not REDIS_URL

if REDIS_URL:
    from common.channel_prefix import channel_prefix  # noqa: E402 - pure

    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "canvas.layers.RedisPubSubLayer",
            # A prefix of its own per deployment sharing a Redis (pub/sub ignores the db):
            # CANVAS_CHANNEL_PREFIX, else one from REDIS_URL's database number.
            "CONFIG": {
                "hosts": [REDIS_URL],
                "prefix": channel_prefix(REDIS_URL, os.environ.get("CANVAS_CHANNEL_PREFIX")),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "canvas.layers.ThreadSafeInMemoryChannelLayer"}}
# How often an idle websocket reads the log itself, in case a hint was lost (canvas.consumers).
CANVAS_SAFETY_POLL_SECONDS = float(os.environ.get("CANVAS_SAFETY_POLL_SECONDS", "5"))

# The in-memory broker ignores the host; naming one keeps kombu from warning at every start.
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Slices are seconds long; the lease, not redelivery, guarantees one runner.
    "visibility_timeout": int(os.environ.get("CANVAS_VISIBILITY_TIMEOUT", "3600")),
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Every task has time limits; run_slice sets its own from the slice limits (orchestration/tasks.py).
CELERY_TASK_SOFT_TIME_LIMIT = 60
CELERY_TASK_TIME_LIMIT = 90
# A slice spends most of its time waiting on the model, so a plain `celery -A canvas worker`
# runs slices on threads: a waiting slice costs a thread, not a process (prefork's default of
# one process per core ran 2 conversations at once on 2 cores). Each thread keeps one database
# connection while it works; run one worker process per core for CPU (docs/deploy.md).
# `-P` on the command line wins over CANVAS_WORKER_POOL, and the default slots follow the
# pool: 32 threads, or one process per core (canvas/worker_command.py).
from canvas.worker_command import default_slots  # noqa: E402 - pure

CELERY_WORKER_POOL = os.environ.get("CANVAS_WORKER_POOL", "threads")
CELERY_WORKER_CONCURRENCY = int(os.environ.get("CANVAS_WORKER_CONCURRENCY") or 0) or default_slots(
    CELERY_WORKER_POOL
)
# `python manage.py worker` (canvas/worker_supervisor.py) starts CANVAS_WORKER_PROCESSES plain
# workers (default: one per core, so the GIL leaves no core idle) of CANVAS_WORKER_THREADS
# threads each (8: two processes of 8 beat one of 32 on 2 cores, bench/README.md).
from canvas.worker_supervisor import default_processes  # noqa: E402 - pure

CANVAS_WORKER_PROCESSES = int(os.environ.get("CANVAS_WORKER_PROCESSES") or 0) or default_processes()
CANVAS_WORKER_THREADS = int(os.environ.get("CANVAS_WORKER_THREADS") or 8)

# --- The agent runtime ----------------------------------------------------------------------
CANVAS_WORKSPACES_ROOT = Path(os.environ.get("CANVAS_WORKSPACES_ROOT", VAR_DIR / "workspaces"))
CANVAS_STATE_ROOT = Path(os.environ.get("CANVAS_STATE_ROOT", VAR_DIR / "state"))
# Host commands (terminal, hooks) run under bubblewrap (workspaces/sandbox.py). Where it does
# not work they refuse to run, unless this allows them unsandboxed: only the embedded demo does.
CANVAS_BWRAP = os.environ.get("CANVAS_BWRAP", "")
CANVAS_UNSANDBOXED_COMMANDS = _env_bool("CANVAS_UNSANDBOXED_COMMANDS", EMBEDDED)
# A team policy's network="host" reaches the host's own services (Postgres, Redis) too.
CANVAS_SANDBOX_ALLOW_HOST_NETWORK = _env_bool("CANVAS_SANDBOX_ALLOW_HOST_NETWORK", False)
# The scripted and demo models answer in this process without LiteLLM (seconds of CPU to
# import). The test suite sets this so they go through LiteLLM's own code path instead, as
# its custom provider "canvas": the model is the one thing faked, never the path to it.
CANVAS_SCRIPTED_THROUGH_LITELLM = _env_bool("CANVAS_SCRIPTED_THROUGH_LITELLM", False)
CANVAS_SANDBOX_READONLY_PATHS = _env_list("CANVAS_SANDBOX_READONLY_PATHS", "")


def _check_sandbox_paths(paths: list[str]) -> None:
    """A path no sandbox may mount (/, /etc, /var/run, this folder...) stops the server here."""
    from workspaces.mounts import site_path_refusals

    if refused := site_path_refusals(paths):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("CANVAS_SANDBOX_READONLY_PATHS: " + "; ".join(refused))


_check_sandbox_paths(CANVAS_SANDBOX_READONLY_PATHS)
# Docker workspaces (workspaces/docker.py): the default image, the images teams may choose
# from (a policy's allowed_images narrows this list), and the site's resource limits, which a
# team policy may only lower. Empty limits: no limit of the site's own.
CANVAS_DOCKER_IMAGE = os.environ.get("CANVAS_DOCKER_IMAGE", "canvas-sandbox:latest")
CANVAS_DOCKER_IMAGES = _env_list("CANVAS_DOCKER_IMAGES", "") or [CANVAS_DOCKER_IMAGE]
CANVAS_DOCKER_CPUS = float(os.environ.get("CANVAS_DOCKER_CPUS") or 2) or None
CANVAS_DOCKER_MEMORY_MB = int(os.environ.get("CANVAS_DOCKER_MEMORY_MB") or 2048) or None
CANVAS_DOCKER_PIDS = int(os.environ.get("CANVAS_DOCKER_PIDS") or 512) or None
# Git sources (workspaces/sources.py): repositories checked out as worktrees by name (JSON
# {"name": "/path/to/repo"}), and the folders local repositories may be cloned from (none by
# default: the worker's disk holds other teams' workspaces).
CANVAS_GIT_REPOS = json.loads(os.environ.get("CANVAS_GIT_REPOS") or "{}")
CANVAS_GIT_LOCAL_ROOTS = _env_list("CANVAS_GIT_LOCAL_ROOTS", "")
# Plain http git URLs (anyone on the path can change what is cloned): refused unless set.
CANVAS_GIT_ALLOW_HTTP = _env_bool("CANVAS_GIT_ALLOW_HTTP", False)
# Site-wide ACP agent profiles (acp_bridge/profiles.py; issue 14): JSON {"NAME": {"command":
# ..., "args": [...], "env": {"VAR": "text" or {"secret": "TEAM_SECRET"}}, "secrets": [...],
# "default_mode", "idle_timeout_seconds", "turn_timeout_seconds", "readonly": [host paths the
# sandboxed agent may read, e.g. its installation], "network": "none" | "host"}}. Checked here,
# so a malformed value stops the server at startup with an ImproperlyConfigured naming the key.


def _acp_agents() -> dict:
    from acp_bridge.profiles import site_profiles_parse

    raw = os.environ.get("CANVAS_ACP_AGENTS") or ""
    site_profiles_parse(raw)
    return json.loads(raw) if raw.strip() else {}


CANVAS_ACP_AGENTS = _acp_agents()
# What a team's own ACP profile may grant its agent (acp_bridge/profiles.py): the networks it
# may pick ("outbound" is the public internet through the outbound guard, workspaces/egress.py;
# "host" the host's own, loopback included) and the host folders its `readonly` paths must lie
# in (none by default: the worker's disk holds other teams' workspaces).
CANVAS_ACP_TEAM_NETWORKS = _env_list("CANVAS_ACP_TEAM_NETWORKS", "none,outbound")
CANVAS_ACP_TEAM_READONLY_PATHS = _env_list("CANVAS_ACP_TEAM_READONLY_PATHS", "")


def _check_acp_team_grants() -> None:
    from acp_bridge.profiles import team_grants_check

    team_grants_check(CANVAS_ACP_TEAM_NETWORKS, CANVAS_ACP_TEAM_READONLY_PATHS)


_check_acp_team_grants()
# Automations' webhooks (automations/webhooks.py): the largest body read, and signed
# deliveries one automation accepts per minute.
CANVAS_WEBHOOK_MAX_BYTES = int(os.environ.get("CANVAS_WEBHOOK_MAX_BYTES") or 1024 * 1024)
# The largest workspace folder a fork copies, in the request that makes it (orchestration/fork.py).
CANVAS_FORK_MAX_BYTES = int(os.environ.get("CANVAS_FORK_MAX_BYTES") or 512 * 1024 * 1024)
CANVAS_WEBHOOK_RATE_PER_MINUTE = int(os.environ.get("CANVAS_WEBHOOK_RATE_PER_MINUTE") or 60)
# Refused deliveries (unknown hook, bad signature) from one address, or with a bad signature to
# one automation: after CANVAS_WEBHOOK_FAILURE_LIMIT within CANVAS_WEBHOOK_COOLOFF_SECONDS,
# further refusals answer 429 with Retry-After (a correctly signed delivery is still taken).
CANVAS_WEBHOOK_FAILURE_LIMIT = int(os.environ.get("CANVAS_WEBHOOK_FAILURE_LIMIT") or 20)
CANVAS_WEBHOOK_COOLOFF_SECONDS = float(os.environ.get("CANVAS_WEBHOOK_COOLOFF_SECONDS") or 300)
# The longest ACP turn any profile may run: bounds the task (and its lease keeper) of a turn.
CANVAS_ACP_MAX_TURN_SECONDS = float(os.environ.get("CANVAS_ACP_MAX_TURN_SECONDS", "86400"))
# How long an external agent's permission request waits for a person before it is answered as
# rejected; a team policy may only shorten it (teams.policies).
CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS = int(
    os.environ.get("CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS") or 600
)
# Recovery time: a dead runner's run continues at most lease + sweep seconds after its last
# renewal, a lost slice message within two sweep periods; 10 + 5 puts every run back to work
# within 15 s of Redis or Postgres returning (orchestration/chain/sweep.py).
CANVAS_LEASE_SECONDS = float(os.environ.get("CANVAS_LEASE_SECONDS", "10"))
CANVAS_SLICE_STEPS = int(os.environ.get("CANVAS_SLICE_STEPS", "5"))
CANVAS_SLICE_SECONDS = float(os.environ.get("CANVAS_SLICE_SECONDS", "10"))
CANVAS_SWEEP_SECONDS = float(os.environ.get("CANVAS_SWEEP_SECONDS", "5"))
# A run's MCP servers stay up between its slices on a worker process for at most this long
# without a slice (orchestration/mcp/pool.py); 0 starts them for every slice.
CANVAS_MCP_KEEP_SECONDS = float(os.environ.get("CANVAS_MCP_KEEP_SECONDS", "60"))
# How often beat fires the automations' cron schedules; a slot fires at most this late, and
# `missed: skip` still fires one up to max(2 x this, 60 s) late (automations/schedules.py).
CANVAS_SCHEDULE_SECONDS = float(os.environ.get("CANVAS_SCHEDULE_SECONDS", "30"))
CANVAS_CONTAINER_SWEEP_SECONDS = float(os.environ.get("CANVAS_CONTAINER_SWEEP_SECONDS", "300"))
# One run_slice task runs its conversation's next slices itself for this long before sending
# the next one to the back of the queue: a busy run keeps its place, and no run holds a worker
# slot much longer than this while others wait.
CANVAS_TASK_SECONDS = float(os.environ.get("CANVAS_TASK_SECONDS", "30"))
# run_slice's Celery time limits; unset, orchestration/tasks.py derives them from the slice
# limits and the longest command a terminal call may run. Celery enforces them in the prefork
# pool only (not threads): there the command and model timeouts bound a slice.
CANVAS_SLICE_SOFT_TIME_LIMIT = float(os.environ.get("CANVAS_SLICE_SOFT_TIME_LIMIT") or 0) or None
CANVAS_SLICE_TIME_LIMIT = float(os.environ.get("CANVAS_SLICE_TIME_LIMIT") or 0) or None
CANVAS_MAX_ITERATIONS = int(os.environ.get("CANVAS_MAX_ITERATIONS", "100"))
# Sub-agents (issue 13): the site's defaults and caps; a policy row may only tighten them
# (teams.policies). A limit of 0 means the site sets none.
CANVAS_SUBAGENTS_ALLOWED = _env_bool("CANVAS_SUBAGENTS_ALLOWED", True)
CANVAS_SUBAGENT_MAX_DEPTH = int(os.environ.get("CANVAS_SUBAGENT_MAX_DEPTH") or 3) or None
CANVAS_SUBAGENT_MAX_CHILDREN_PER_CALL = (
    int(os.environ.get("CANVAS_SUBAGENT_MAX_CHILDREN_PER_CALL") or 5) or None
)
CANVAS_SUBAGENT_MAX_CHILDREN_PER_RUN = (
    int(os.environ.get("CANVAS_SUBAGENT_MAX_CHILDREN_PER_RUN") or 50) or None
)
CANVAS_SUBAGENT_MAX_CONCURRENT_CHILDREN = (
    int(os.environ.get("CANVAS_SUBAGENT_MAX_CONCURRENT_CHILDREN") or 8) or None
)
CANVAS_LLM_NUM_RETRIES = int(os.environ.get("CANVAS_LLM_NUM_RETRIES", "3"))
CANVAS_LLM_TIMEOUT = float(os.environ.get("CANVAS_LLM_TIMEOUT", "120"))
CANVAS_DEFAULT_MODEL = os.environ.get("CANVAS_DEFAULT_MODEL", "demo")
# Where people reach the UI: links in team notifications (orchestration/control/notify.py) use it.
CANVAS_BASE_URL = os.environ.get("CANVAS_BASE_URL", "http://127.0.0.1:8000")
# Fernet keys for team secrets, comma-separated; the first encrypts (teams/crypto.py). Unset:
# a key derived from SECRET_KEY, for the embedded mode only.
CANVAS_SECRET_KEYS = _env_list("CANVAS_SECRET_KEYS", "")
# Local workspaces live on one machine's disk, so a conversation's slices go to the queue of the
# host that ran its first slice. Turn off when workspaces sit on storage every worker mounts.
from common.worker_host import stable_worker_host  # noqa: E402 - pure

# Stable across container restarts: CANVAS_WORKER_HOST, else a name kept in the state root.
CANVAS_WORKER_HOST = stable_worker_host(CANVAS_STATE_ROOT, os.environ.get("CANVAS_WORKER_HOST"))
# Workers announce themselves every CANVAS_WORKER_HEARTBEAT_SECONDS (orchestration/chain/workers.py);
# a run pinned to a host silent for CANVAS_WORKER_GONE_SECONDS moves to any worker when
# workspaces are on shared storage (CANVAS_SHARED_WORKSPACES), else ends with an error.
CANVAS_WORKER_HEARTBEAT_SECONDS = float(os.environ.get("CANVAS_WORKER_HEARTBEAT_SECONDS", "5"))
CANVAS_WORKER_GONE_SECONDS = float(os.environ.get("CANVAS_WORKER_GONE_SECONDS", "90"))
CANVAS_SHARED_WORKSPACES = _env_bool("CANVAS_SHARED_WORKSPACES", False)
CANVAS_PIN_TO_HOST = _env_bool("CANVAS_PIN_TO_HOST", True)
# Private ranges (comma-separated CIDRs) that team webhooks and model profiles' api_base may
# reach; loopback, link-local, private and reserved targets are refused otherwise, and cloud
# metadata always (common/netguard.py). Parsed here so a typo stops the start, not a save.
from common.netguard import parse_networks  # noqa: E402 - pure, imports nothing of Django

CANVAS_ALLOWED_PRIVATE_NETWORKS = _env_list("CANVAS_ALLOWED_PRIVATE_NETWORKS", "")
parse_networks(CANVAS_ALLOWED_PRIVATE_NETWORKS)

# Beat's jobs and periods, shared with the embedded sweeper (canvas/periodic.py).
from canvas.periodic import beat_schedule  # noqa: E402 - pure, imports nothing of Django

CELERY_BEAT_SCHEDULE = beat_schedule(globals())

# --- Auth, static, i18n ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "conversation-list"
LOGOUT_REDIRECT_URL = "login"
# The axes backend only refuses locked-out logins; ModelBackend checks the password.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve app static files straight from their folders: no collectstatic step for `make up`.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Behind TLS (production): one switch turns on everything `manage.py check --deploy` asks for.
CANVAS_HTTPS = _env_bool("CANVAS_HTTPS", False)
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", CANVAS_HTTPS)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", CANVAS_HTTPS)
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", CANVAS_HTTPS)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", 31_536_000 if CANVAS_HTTPS else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = CANVAS_HTTPS
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", CANVAS_HTTPS)
# Behind a proxy: the client's address is the last X-Forwarded-For entry (the one the proxy
# appended), not REMOTE_ADDR, for throttling and lock-outs (teams.throttle.client_address).
CANVAS_BEHIND_PROXY = _env_bool("CANVAS_BEHIND_PROXY", CANVAS_HTTPS)
if CANVAS_BEHIND_PROXY:
    # The TLS-terminating proxy says which scheme the browser used.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): scripts, styles and sockets from this origin only. Pages
# load htmx and their scripts as files, with no inline code, handlers or styles and no eval
# (templates/base.html configures htmx for that). `data:` images: the blank favicon and the
# API docs' icons. 'self' in connect-src covers ws(s):// of the same host (CSP Level 3).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# --- Throttling: login lock-outs and bad API tokens -----------------------------------------
# Counters every process shares: Redis in production, this process's memory when embedded.
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": REDIS_URL, "KEY_PREFIX": "canvas"}}  # fmt: skip
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Logins (the login page and /admin/): django-axes counts failures in the database and locks
# an account, or a client address, after CANVAS_LOGIN_FAILURE_LIMIT of them, for
# CANVAS_LOGIN_COOLOFF_SECONDS; a success resets the count. Refused attempts during a
# lock-out do not extend it, so the owner gets back in on time.
AXES_FAILURE_LIMIT = int(os.environ.get("CANVAS_LOGIN_FAILURE_LIMIT", "10"))
AXES_COOLOFF_TIME = timedelta(seconds=float(os.environ.get("CANVAS_LOGIN_COOLOFF_SECONDS", "900")))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_CLIENT_IP_CALLABLE = "teams.throttle.client_address"
AXES_LOCKOUT_CALLABLE = "canvas.auth_views.lockout_response"
AXES_VERBOSE = False
# API tokens (HTTP and websocket): CANVAS_TOKEN_FAILURE_LIMIT unknown, revoked or expired
# tokens from one client address within CANVAS_TOKEN_COOLOFF_SECONDS block that address's
# token authentication for CANVAS_TOKEN_COOLOFF_SECONDS (429 with Retry-After).
CANVAS_TOKEN_FAILURE_LIMIT = int(os.environ.get("CANVAS_TOKEN_FAILURE_LIMIT", "20"))
CANVAS_TOKEN_COOLOFF_SECONDS = float(os.environ.get("CANVAS_TOKEN_COOLOFF_SECONDS", "300"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact_secrets": {"()": "canvas.logging.RedactSecretsFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["redact_secrets"]},
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "LiteLLM": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        # axes logs every login at INFO; lock-outs are in the audit log (teams/throttle.py).
        "axes": {"level": "WARNING"},
        "celery": {"level": os.environ.get("CELERY_LOG_LEVEL", "WARNING")},
        # 4xx answers are lines of the request log (canvas.request_log); errors still show.
        "django.request": {"level": "ERROR"},
    },
}
