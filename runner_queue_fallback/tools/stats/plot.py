"""`stats --plot FILE`: the Kaplan-Meier curves as a PNG or SVG (matplotlib, an optional extra)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runner_queue_fallback.tools.stats.pools import PoolData

__all__ = ["PlotUnavailable", "write"]


class PlotUnavailable(Exception):
    """matplotlib is not installed."""


def write(pools: Mapping[str, PoolData], path: Path) -> None:
    """Draw P(runner within t) per pool, up to each pool's horizon, to `path` (.png or .svg)."""
    try:
        import matplotlib as mpl  # noqa: PLC0415  # optional: pip install 'runner-queue-fallback[plot]'

        mpl.use("Agg")
        from matplotlib import pyplot as plt  # noqa: PLC0415  # after choosing the backend
    except ImportError as exc:
        raise PlotUnavailable(
            "needs matplotlib: pip install 'runner-queue-fallback[plot]'"
        ) from exc
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for pool in pools.values():
        if pool.unmeasurable is not None:  # one curve of several pools: drawn nowhere
            continue
        curve = pool.curve
        xs = [0.0, *(t / 60 for t in curve.times), curve.horizon / 60]
        ys = [0.0, *(100 * (1 - s) for s in curve.survival)]
        ys.append(ys[-1])
        axes.step(xs, ys, where="post", label=f"{pool.text} ({pool.children} children)")
    axes.set_xlabel("minutes in the queue")
    axes.set_ylabel("% with a runner (Kaplan-Meier)")
    axes.set_ylim(0, 100)
    axes.grid(visible=True, alpha=0.3)
    axes.legend(loc="lower right", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, format=path.suffix.lower().lstrip("."))
    plt.close(figure)
