# Two images from one file:
#   docker build --target operator -t xla-sentinel-operator .
#   docker build --target runner --build-arg FLAVOR=cpu|cuda|tpu -t xla-sentinel-runner .
#   docker build --target runner --build-arg VERSION_ENVS="0.9.2 0.10.1" ...  (older jaxlib
#     releases for version bisection: spec.bisect.versions, docs/versions.md)
# The operator image never contains jax; the runner image holds the engine and one jax
# flavour. Both run as the unprivileged user 10001 that the Helm chart's securityContext
# (runAsUser 10001) expects, and work with a read-only root filesystem.
# A plain Dockerfile (no syntax line, no heredocs): it builds with BuildKit and with the
# legacy builder alike, where no registry serves a BuildKit frontend. `make images`
# (deploy/images/build.sh) builds it on a machine without a registry, on a base made from
# Debian's packages (PYTHON_IMAGE=...) where the default below cannot be pulled. The legacy
# builder builds every stage above --target, so the operator's stages come first.

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
RUN groupadd --system --gid 10001 sentinel \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/sentinel --create-home sentinel \
 && python -m venv /opt/venv \
 && pip install pip==24.3.1 setuptools==75.6.0 wheel==0.45.1
# Exact versions of everything either image installs (deploy/images/constraints.txt).
COPY deploy/images/constraints.txt /opt/constraints.txt

# Source only: tests, benchmarks and local state stay out (.dockerignore).
FROM base AS source
WORKDIR /src
COPY pyproject.toml ./
COPY runners ./runners
COPY operator ./operator

FROM source AS operator-build
# The build fails where XLA packages got in, or where the operator command cannot start
# without the engine extra (numpy included).
RUN pip install -c /opt/constraints.txt '.[operator]' \
 && ! pip show jax jaxlib >/dev/null 2>&1 \
 && xla-sentinel operator --help >/dev/null

FROM base AS operator
LABEL org.opencontainers.image.title="xla-sentinel-operator" \
      org.opencontainers.image.description="kopf operator for FuzzCampaign and BugSignature"
COPY --from=operator-build /opt/venv /opt/venv
USER 10001:10001
WORKDIR /home/sentinel
EXPOSE 8080
ENTRYPOINT ["xla-sentinel"]
CMD ["operator"]

FROM source AS runner-build
ARG FLAVOR=cpu
ARG JAX_VERSION=0.10.2
# The known bugs' reproducers: the agents' gate verifies every fix against them, and the
# package takes them as package data through runners/xla_sentinel/agents/regression-corpus,
# a link to this folder (without it the corpus is empty and the gate refuses every fix).
COPY bench/repros ./bench/repros
# kubernetes: a worker writes its report ConfigMap (runners/xla_sentinel/cluster/report.py), which the
# engine extra does not declare. agents: the agent pods of spec.agents run `xla-sentinel agent`
# from this image (pydantic-ai, the mcp SDK; about 60 MB).
RUN case "${FLAVOR}" in \
      cpu)  jax="jax[cpu]==${JAX_VERSION}" ;; \
      cuda) jax="jax[cuda12]==${JAX_VERSION}" ;; \
      tpu)  jax="jax[tpu]==${JAX_VERSION}" ;; \
      *)    echo "FLAVOR must be cpu, cuda or tpu, not '${FLAVOR}'" >&2; exit 2 ;; \
    esac \
 && pip install -c /opt/constraints.txt "${jax}" '.[engine,agents]' kubernetes \
 && python -c "import jax, jaxlib; assert jax.__version__ == '${JAX_VERSION}', jax.__version__" \
 && python -c "from xla_sentinel.agents.gate import MIN_REGRESSION as m; from xla_sentinel.agents.tools import default_regression_corpus as c; assert len(c()) >= m, c()"
# Release environments for `bisect --versions` and spec.bisect.versions: one venv per
# older jaxlib (runners/xla_sentinel/core/versions.py creates them as `make version-envs` does, from PyPI at
# build time; about 600 MB each). None by default.
ARG VERSION_ENVS=""
RUN mkdir -p /opt/xla-sentinel/envs \
 && if [ -n "${VERSION_ENVS}" ]; then \
      XLA_SENTINEL_VERSION_ENVS=/opt/xla-sentinel/envs python -m xla_sentinel.core.versions create ${VERSION_ENVS}; \
    fi

FROM base AS runner
ARG FLAVOR=cpu
LABEL org.opencontainers.image.title="xla-sentinel-runner" \
      org.opencontainers.image.description="xla-sentinel engine and worker (jax flavour: ${FLAVOR})"
COPY --from=runner-build /opt/venv /opt/venv
COPY --from=runner-build /opt/xla-sentinel/envs /opt/xla-sentinel/envs
# With a read-only root filesystem, jax and XLA write only to the /tmp volume the pod mounts.
# The release environments are where versions.py looks for them.
ENV HOME=/tmp XDG_CACHE_HOME=/tmp/.cache XLA_SENTINEL_VERSION_ENVS=/opt/xla-sentinel/envs
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["xla-sentinel"]
CMD ["worker"]
