# One image for both actions: action.yml (coordinator main + post cleanup) and guard/action.yml.
# The runner builds it with the repository root as context (guard/action.yml says ../Dockerfile)
# and starts it as `docker run --rm --workdir /github/workspace -e INPUT_... --entrypoint X <image>`.
#
# Two stages on the same base: the builder makes /app (venv, code, profiles, /app/bin) and
# byte-compiles it; the runtime stage copies only those, so pip, the lock file and the build's
# leftovers never reach the image.
#
# The base, named once, by digest: the runner builds without --pull, so a tag would name whatever
# image the runner's Docker engine holds under it (an earlier job may have tagged its own). The
# digest is python:3.12-slim's multi-platform index (Python 3.12.13 on Debian trixie; linux/amd64
# and linux/arm64/v8 among its platforms), as two public sources give it, no registry being
# reachable here: docker-library/repo-info, repos/python/remote/3.12-slim.md (commit 2986dca3a80c,
# the index of the 2026-08-05 build), and the pinned FROM of kouroshez/coding-os's Dockerfile
# (commit a63730e9853a, 2026-08-13). Dependabot (.github/dependabot.yml) moves it with patches;
# by hand: `docker buildx imagetools inspect python:3.12-slim`. The tag is there for readers.
FROM python:3.12-slim@sha256:229a2c5bfa27522db7815ea81f9bed70af17ccb9de9fc7ad142b1877b5830d36 AS base

FROM base AS builder

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# Dependencies first, in their own layer: exactly the versions and files in requirements/runtime.txt
# (scripts/lock generates it from pyproject.toml's [project].dependencies, the one source of
# truth). --require-hashes refuses any file whose hash is not in the lock, --no-deps installs
# nothing the lock does not list, --only-binary keeps compilers out. pip and setuptools leave the
# venv afterwards: the image only runs code.
COPY requirements/runtime.txt /build/runtime.txt
RUN python -m venv /app/venv \
 && /app/venv/bin/python -m pip install --no-cache-dir --require-hashes --no-deps \
      --only-binary=:all: -r /build/runtime.txt \
 && /app/venv/bin/python -m pip uninstall --yes --quiet pip setuptools \
 && /app/venv/bin/python -m compileall -q -j 0 /app/venv

# The code, and profiles/ next to the package where profiles.default_profiles_dir() looks
# (/app/runner_queue_fallback/../profiles). Byte-compiled here so a cold start reads .pyc files.
COPY runner_queue_fallback /app/runner_queue_fallback
COPY profiles /app/profiles

# /app/bin/<command>: what action.yml's entrypoint / post-entrypoint and guard/action.yml's
# entrypoint name. Each is a Python script (no shell in between), so Python is PID 1 and receives
# the SIGINT/SIGTERM that `docker run` forwards on cancellation.
RUN mkdir /app/bin \
 && for command in coordinate cleanup guard; do \
      printf '#!/app/venv/bin/python\n"""Run: python -m runner_queue_fallback %s."""\nimport sys\n\nfrom runner_queue_fallback.cli import main\n\nsys.exit(main(["%s", *sys.argv[1:]]))\n' \
        "$command" "$command" > "/app/bin/$command" \
      && chmod 0755 "/app/bin/$command"; \
    done \
 && /app/venv/bin/python -m compileall -q -j 0 /app/runner_queue_fallback \
 && PYTHONPATH=/app /app/venv/bin/python -c "import runner_queue_fallback.cli, runner_queue_fallback.core.profiles as p; p.load_profiles()"


FROM base

# No WORKDIR (the runner mounts the workspace and sets --workdir) and no USER (the action must be
# root to write GITHUB_OUTPUT/GITHUB_STATE files owned by the runner): every path here is absolute.
# PYTHONSAFEPATH keeps the consumer's workspace (the cwd) off sys.path for `python -m`.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONSAFEPATH=1 \
    PYTHONPATH=/app

# Same paths as in the builder (the venv's python and the /app/bin shebangs point there), in
# layers ordered by how often they change: dependencies, then entry scripts, profiles, code.
COPY --from=builder /app/venv /app/venv
COPY --from=builder /app/bin /app/bin
COPY --from=builder /app/profiles /app/profiles
COPY --from=builder /app/runner_queue_fallback /app/runner_queue_fallback

# Anything else (plan, simulate, lint, --help) through the generic entry point:
#   docker run --rm <image> plan --runner-type gpu
ENTRYPOINT ["/app/venv/bin/python", "-m", "runner_queue_fallback"]
CMD ["--help"]
