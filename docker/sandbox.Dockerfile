# The default image of Docker workspaces (CANVAS_DOCKER_IMAGE=canvas-sandbox:latest):
#   make sandbox-image        (docker build -t canvas-sandbox:latest -f docker/sandbox.Dockerfile docker)
# A team's own toolchain is any image that has bash, setsid and sleep (util-linux or busybox);
# list it in CANVAS_DOCKER_IMAGES. The workspace is bind-mounted at /workspace; the container
# runs as the image's user (here `agent`, uid 1000) with every capability dropped.
FROM debian:bookworm-slim

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash ca-certificates coreutils curl findutils git grep less procps python3 python3-pip \
      python3-venv sed tar unzip util-linux xz-utils \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 1000 --shell /bin/bash agent \
 && mkdir -p /workspace && chown agent:agent /workspace

USER agent
WORKDIR /workspace
CMD ["sleep", "infinity"]
