"""Every typed error of the package has one root, and no two share a name."""

import importlib
import inspect
import pkgutil

import cocoda_jax
import third_party
from cocoda_jax.errors import CocodaError, ConfigError

#: Not errors a caller handles: a signal that unwinds a sandboxed program past ``except Exception``,
#: and the crash the restart tests inject on purpose.
NOT_TYPED_ERRORS = {"CpuLimitExceeded", "SimulatedCrash"}
#: Raised by the modules the sandbox worker loads by file path with the standard library only (it
#: cannot import the package); the trainer reports their failures as ``SandboxError``.
WORKER_SIDE = {"UnencodableValue", "FrameError", "SandboxViolation"}


def _error_classes():
    found = {}
    for package in (cocoda_jax, third_party):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for name, obj in vars(module).items():
                if (inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name
                        and not name.startswith("_")):
                    found.setdefault(name, []).append(obj)
    return found


def test_every_public_error_is_a_cocoda_error_and_names_are_unique():
    classes = _error_classes()
    assert len(classes) > 40  # the walk found the package's errors
    outside = sorted(n for n, objs in classes.items() for c in objs
                     if n not in NOT_TYPED_ERRORS | WORKER_SIDE and not issubclass(c, CocodaError))
    assert outside == []
    twice = sorted(n for n, objs in classes.items() if len(objs) > 1)
    assert twice == []


def test_config_errors_are_one_family():
    from cocoda_jax.data.domain import DomainConfigError
    from cocoda_jax.runs import settings

    assert issubclass(DomainConfigError, ConfigError) and issubclass(ConfigError, ValueError)
    assert settings.ConfigError is ConfigError
