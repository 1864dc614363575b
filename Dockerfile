# syntax=docker/dockerfile:1
# gangsched scheduler image: non-root, works with a read-only root filesystem.
#
# The package goes in through image/install.sh, the same script `make image`
# runs in its Debian root filesystem (image/build.sh), so both images hold the
# same virtualenv, user and entrypoint.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS wheels
WORKDIR /src
# requirements.lock pins every dependency when present (the glob keeps the build working without it).
COPY pyproject.toml README.md requirements*.lock ./
COPY gangsched ./gangsched
RUN set -eu; constraints=""; \
    if [ -f requirements.lock ]; then constraints="--constraint requirements.lock"; fi; \
    pip wheel --no-cache-dir --disable-pip-version-check --wheel-dir /wheels $constraints .

FROM ${PYTHON_IMAGE}
COPY image/install.sh /usr/local/share/gangsched/install.sh
RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    sh /usr/local/share/gangsched/install.sh /wheels \
    && rm -rf /usr/local/share/gangsched /root/.cache
ENV PATH=/opt/gangsched/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["gangsched"]
CMD ["run"]
