"""One root for the package's errors (issue 40 item 7): `TriogroupsError`.

Every exception class triogroups defines derives from it, and keeps the built-in base its
meaning calls for, so code that caught the built-in before still catches it.
"""

from __future__ import annotations

import importlib
import pickle
import pkgutil

import pytest
import trio

import triogroups
import triogroups.supervisor.spark
import triogroups.testing
from triogroups import TriogroupsError
from triogroups._public import PUBLIC_NAMESPACES, Namespace

# Outside the root on purpose (see `triogroups._error_root`): a SystemExit ends the process and
# must not be caught by ``except Exception``; the test kit's failed checks are assertions.
TEST_KIT_CHECKS = {"ContractViolation", "HistoryError", "Livelock"}
OUTSIDE = {
    "triogroups.Interrupted",
    "triogroups.SignalExit",
    "triogroups.chaos._campaign._Terminated",
} | {f"triogroups.testing.{name}" for name in TEST_KIT_CHECKS}


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the package, by its public path."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(triogroups.__path__, "triogroups."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("triogroups")
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_exception_class_of_the_package_is_a_triogroups_error() -> None:
    classes = exception_classes()
    assert len(classes) > 25
    assert set(OUTSIDE) <= set(classes)
    outside = sorted(path for path, cls in classes.items() if not issubclass(cls, TriogroupsError))
    assert outside == sorted(OUTSIDE)


@pytest.mark.parametrize("namespace", PUBLIC_NAMESPACES, ids=lambda ns: ns.module)
def test_each_exported_exception_is_a_triogroups_error(namespace: Namespace) -> None:
    """What a public namespace (`PUBLIC_NAMESPACES`) exports: every Exception but the test
    kit's failed checks."""
    module = importlib.import_module(namespace.module)
    exported = [getattr(module, n) for n in module.__all__]
    errors = [e for e in exported if isinstance(e, type) and issubclass(e, Exception)]
    assert errors
    outside = sorted(e.__name__ for e in errors if not issubclass(e, TriogroupsError))
    assert outside == (sorted(TEST_KIT_CHECKS) if module is triogroups.testing else [])


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (triogroups.PropertyError, ValueError),
        (triogroups.MessageTooLarge, ValueError),
        (triogroups.AppError, ValueError),
        (triogroups.ActorGone, RuntimeError),
        (triogroups.UnknownMethod, LookupError),
        (triogroups.MailboxFull, trio.WouldBlock),
        (triogroups.RpcTimeout, TimeoutError),
        (triogroups.RpcTimeout, triogroups.ChannelError),
        (triogroups.ProcessGroupFailed, triogroups.RestartIntensityExceeded),
        (triogroups.StartupError, triogroups.PermanentError),
        (triogroups.supervisor.spark.SparkUnavailable, RuntimeError),
    ],
    ids=lambda v: v.__name__,
)
def test_errors_keep_their_builtin_bases(error: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(error, builtin) and issubclass(error, TriogroupsError)


def test_rpc_timeout_is_caught_by_except_timeout_error_and_keeps_its_message() -> None:
    try:
        raise triogroups.RpcTimeout("no answer from B within 1s")
    except TimeoutError as exc:
        caught: BaseException = exc
    assert str(caught) == "no answer from B within 1s"
    again = pickle.loads(pickle.dumps(caught))
    assert type(again) is triogroups.RpcTimeout and str(again) == str(caught)
