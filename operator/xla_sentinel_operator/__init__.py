"""The xla-sentinel Kubernetes operator (kopf). Never imports jax."""
