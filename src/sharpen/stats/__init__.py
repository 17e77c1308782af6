"""Statistics over stored trajectories."""

from sharpen.stats.intervals import wilson_interval

__all__ = ["wilson_interval"]
