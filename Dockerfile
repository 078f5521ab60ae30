# syntax=docker/dockerfile:1
# The desk's web process. docker-compose.yml runs it against MongoDB (MONGODB_URI); run alone
# without MONGODB_URI it falls back to the embedded database under DESK_DATA_DIR.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# Installed by root from a root-owned copy, so the running user cannot change the code it runs.
# (`desk worker`, the worker process, runs from this install too: see docker-compose.yml.)
WORKDIR /src
COPY . .
# The pip cache lives in a BuildKit cache mount: rebuilds after a code change skip the downloads,
# and the image carries no cache.
RUN --mount=type=cache,target=/root/.cache/pip \
    pip install . \
 && useradd --create-home --uid 10001 --shell /usr/sbin/nologin desk

USER desk
# A writable data directory: NiceGUI's per-browser storage and the generated storage secret live
# in DESK_DATA_DIR, and so does the embedded database when MONGODB_URI is unset.
WORKDIR /home/desk
ENV DESK_DATA_DIR=/home/desk/data

EXPOSE 8080
CMD ["desk", "run", "--host", "0.0.0.0"]
