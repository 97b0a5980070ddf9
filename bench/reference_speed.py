"""Time per program of the numpy float64 reference (npref) against `f64_eager`, on the
same generated programs and inputs, in one process, with XLA compiles counted.

f64_eager evaluates the program's graph op by op with jax (one XLA compile per op, shape
and dtype not yet seen by this process); f64_numpy, as the campaign's worker serves it,
lowers the graph's float64 form (a jax trace, no compile) and evaluates it in numpy
(npref), compiling only ops without a numpy form. Also counted: programs whose outputs
the two do not agree on (oracle.references_agree, the campaign's cross-check rule). Both run warm: the
first programs fill jax's caches as a campaign's worker would. Usage:
python bench/reference_speed.py [--programs N] [--seed S] [--special]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

import jax

jax.config.update("jax_enable_x64", True)

from xla_sentinel.judge import oracle  # noqa: E402
from xla_sentinel.programs import evaluate  # noqa: E402
from xla_sentinel.programs.generator import generate  # noqa: E402
from xla_sentinel.programs.inputs import make_inputs  # noqa: E402
from xla_sentinel.spec.campaign import GeneratorSpec, build  # noqa: E402
from xla_sentinel.worker import server as dispatch  # noqa: E402
from xla_sentinel.worker.protocol import NumpyReference  # noqa: E402

TABLE = dispatch.load_table("current")  # the handlers a worker of this release serves

COMPILES = Counter()


def _count(event: str, duration: float, **_: object) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        COMPILES["n"] += 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--special", action="store_true")
    a = ap.parse_args()
    jax.monitoring.register_event_duration_secs_listener(_count)
    spec = build(GeneratorSpec, {"minOps": 2, "maxOps": 16,
                                 "dtypes": ["f32", "bf16", "f16", "s32", "u8", "bool"]}, "generator")
    eager_s, numpy_s, eager_compiles, numpy_compiles, fallbacks = [], [], [], [], Counter()
    disagree = 0
    for index in range(a.programs):
        graph = generate(a.seed, index, spec)
        inputs = make_inputs({"seed": a.seed, "index": index, "special": a.special}, graph.inputs)
        before = COMPILES["n"]
        t0 = time.perf_counter()
        expected = evaluate.eager(graph, inputs, promote=True)
        eager_s.append(time.perf_counter() - t0)
        eager_compiles.append(COMPILES["n"] - before)
        t0 = time.perf_counter()
        reply = dispatch.handle(TABLE, NumpyReference("", inputs, graph))
        numpy_s.append(time.perf_counter() - t0)
        numpy_compiles.append(sum(reply.fallbacks.values()))  # one XLA compile per fallback
        fallbacks.update(reply.fallbacks)
        infos = [oracle.OutputInfo(graph.values[i].dtype, graph.values[i].tainted) for i in graph.outputs]
        disagree += not oracle.references_agree(reply.outputs, expected, infos)

    def line(name: str, times: list[float], compiles: list[int]) -> str:
        return (f"{name:10s} total {sum(times):7.2f} s  median {1e3 * statistics.median(times):7.2f} ms  "
                f"p90 {1e3 * sorted(times)[int(0.9 * len(times))]:7.2f} ms  "
                f"XLA compiles/program {sum(compiles) / len(compiles):6.2f}")

    print(f"{a.programs} programs, seed {a.seed}, special inputs: {a.special}")
    print(line("f64_eager", eager_s, eager_compiles))
    print(line("f64_numpy", numpy_s, numpy_compiles))
    print(f"ratio f64_eager / f64_numpy: total {sum(eager_s) / sum(numpy_s):.2f}x, "
          f"median {statistics.median(eager_s) / statistics.median(numpy_s):.2f}x")
    print(f"numpy fallbacks to XLA: {dict(fallbacks) or 'none'}")
    print(f"programs where f64_numpy and f64_eager disagree: {disagree} of {a.programs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
