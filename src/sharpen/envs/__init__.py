"""The domain layer's environments. Protocols live in :mod:`sharpen.envs.base`; each
environment is a sub-package that registers itself (``@register("env", name)``) when
imported — the registry imports the built-in ones on first use."""

from sharpen.envs.base import EnvInfo, Environment, Generator, Knob, StepResult, Verifier

__all__ = ["EnvInfo", "Environment", "Generator", "Knob", "StepResult", "Verifier"]
