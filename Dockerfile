# syntax=docker/dockerfile:1.7
# Two images from one file:
#   docker build --target operator -t xla-sentinel-operator .
#   docker build --target runner --build-arg FLAVOR=cpu|cuda|tpu -t xla-sentinel-runner .
#   docker build --target runner --build-arg VERSION_ENVS="0.9.2 0.10.1" ...  (older jaxlib
#     releases for version bisection: spec.bisect.versions, docs/versions.md)
# The operator image never contains jax; the runner image holds the engine and one jax
# flavour. Both run as the unprivileged user 10001 that the Helm chart's securityContext
# (runAsUser 10001) expects, and work with a read-only root filesystem.

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
# Exact versions of everything either image installs (resolved with pip against the
# versions the test suite runs on), so a rebuild from the same commit holds the same code.
# The cuda and tpu flavours add jax's own pinned plugin (jax-cuda12-plugin / libtpu).
COPY <<EOF /opt/constraints.txt
aiohappyeyeballs==2.7.1
aiohttp==3.14.5
aiohttp-retry==2.9.1
aiosignal==1.4.0
annotated-types==0.8.0
attrs==26.1.0
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
click==8.5.1
cryptography==50.0.2
decorator==5.3.1
durationpy==0.11
flatbuffers==25.12.19
frozenlist==1.8.0
fsspec==2026.9.0
gcsfs==2026.10.1
google-api-core==2.44.0
google-auth==2.63.0
google-auth-oauthlib==1.5.0
google-cloud-core==2.8.0
google-cloud-storage==3.17.1
google-cloud-storage-control==1.17.0
google-crc32c==1.9.0
google-resumable-media==2.11.0
googleapis-common-protos==1.76.0
grpc-google-iam-v1==0.14.6
grpcio==1.85.3
idna==3.20
iso8601==2.1.0
jax==0.10.2
jaxlib==0.10.2
jsonpatch==1.48
jsonpointer==3.12
kopf==1.45.2
kubernetes==37.0.2
ml_dtypes==0.6.0
multidict==7.2.1
numpy==2.4.6
oauthlib==4.0.1
opentelemetry-api==1.45.2
opt_einsum==3.4.0
packaging==26.4
prometheus_client==0.26.0
propcache==0.5.4
proto-plus==1.29.0
protobuf==7.36.2
pyasn1==0.6.5
pyasn1_modules==0.4.2
pycparser==3.12
pydantic==2.14.4
pydantic_core==2.50.5
python-dateutil==4.0.0
python-json-logger==4.2.0
PyYAML==6.0.4
requests==2.34.2
requests-oauthlib==2.0.0
scipy==1.17.1
structlog==26.1.0
typing_extensions==4.16.0
typing-inspection==0.4.5
tzdata==2026.6
urllib3==2.8.0
websocket-client==1.9.2
yarl==1.25.1
EOF

# Source only: tests, benchmarks and local state stay out (.dockerignore).
FROM base AS source
WORKDIR /src
COPY pyproject.toml ./
COPY runners ./runners
COPY operator ./operator

FROM source AS operator-build
RUN pip install -c /opt/constraints.txt '.[operator]' \
 && ! pip show jax jaxlib >/dev/null 2>&1

FROM source AS runner-build
ARG FLAVOR=cpu
ARG JAX_VERSION=0.10.2
# kubernetes: a worker writes its report ConfigMap (runners/xla_sentinel/cluster/report.py), which the
# engine extra does not declare.
RUN case "${FLAVOR}" in \
      cpu)  jax="jax[cpu]==${JAX_VERSION}" ;; \
      cuda) jax="jax[cuda12]==${JAX_VERSION}" ;; \
      tpu)  jax="jax[tpu]==${JAX_VERSION}" ;; \
      *)    echo "FLAVOR must be cpu, cuda or tpu, not '${FLAVOR}'" >&2; exit 2 ;; \
    esac \
 && pip install -c /opt/constraints.txt "${jax}" '.[engine]' kubernetes \
 && python -c "import jax, jaxlib; assert jax.__version__ == '${JAX_VERSION}', jax.__version__"
# Release environments for `bisect --versions` and spec.bisect.versions: one venv per
# older jaxlib (runners/xla_sentinel/core/versions.py creates them as `make version-envs` does, from PyPI at
# build time; about 600 MB each). None by default.
ARG VERSION_ENVS=""
RUN mkdir -p /opt/xla-sentinel/envs \
 && if [ -n "${VERSION_ENVS}" ]; then \
      XLA_SENTINEL_VERSION_ENVS=/opt/xla-sentinel/envs python -m xla_sentinel.core.versions create ${VERSION_ENVS}; \
    fi

FROM base AS operator
LABEL org.opencontainers.image.title="xla-sentinel-operator" \
      org.opencontainers.image.description="kopf operator for FuzzCampaign and BugSignature"
COPY --from=operator-build /opt/venv /opt/venv
USER 10001:10001
WORKDIR /home/sentinel
EXPOSE 8080
ENTRYPOINT ["xla-sentinel"]
CMD ["operator"]

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
