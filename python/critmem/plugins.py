"""Finding and calling policies written in Python: memory controllers (`[control]
controller`), CPU schedulers and transient-memory schedulers.

A scenario names a Python policy as `"file.py:Class"` (a path relative to the scenario's
directory, or to the working directory for a scenario given as text), `"package.module:Class"`,
or by a name an installed package registers under an entry point group:

    [project.entry-points."critmem.controllers"]
    hold-stall = "mypkg.controllers:HoldStall"

(`critmem.schedulers` and `critmem.memory_schedulers` likewise). Every failure of user code,
when loading or in a call, becomes a `PluginError` whose message is one line naming the class,
the method and the user's file and line; the original exception is its `__cause__`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    import importlib.metadata
    import inspect

Kind: TypeAlias = Literal["controllers", "schedulers", "memory_schedulers"]

GROUPS: dict[Kind, str] = {
    "controllers": "critmem.controllers",
    "schedulers": "critmem.schedulers",
    "memory_schedulers": "critmem.memory_schedulers",
}
_NOUN: dict[Kind, str] = {"controllers": "controller", "schedulers": "scheduler", "memory_schedulers": "memory scheduler"}
_PACKAGE_DIR = str(Path(__file__).resolve().parent)

# Where relative `file.py:Class` paths start: the directory of the scenario being loaded.
_base_dir: contextvars.ContextVar[Path | None] = contextvars.ContextVar("critmem_plugin_base_dir", default=None)


class PluginError(ValueError):
    """User code of a Python policy failed, or cannot be loaded: the message is one line."""


class PluginNotFound(PluginError):
    """No policy has the name: no such file, module, class or entry point."""


@contextlib.contextmanager
def scenario_dir(directory: str | os.PathLike[str] | None) -> Iterator[None]:
    """Resolves relative `file.py:Class` names against `directory` inside the block (None keeps
    the enclosing block's, the working directory outside any)."""
    if directory is None:
        yield
        return
    token = _base_dir.set(Path(directory))
    try:
        yield
    finally:
        _base_dir.reset(token)


def entry_points(kind: Kind) -> dict[str, importlib.metadata.EntryPoint]:
    """The installed entry points of `kind`'s group, by name."""
    # Imported here: `import critmem` stays fast for the command line.
    import importlib.metadata

    return {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUPS[kind])}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _where(exc: BaseException) -> str:
    """`file:line` of the innermost frame of the traceback in user code (outside critmem)."""
    frames = [f for f in _frames(exc.__traceback__) if not f.filename.startswith(_PACKAGE_DIR)]
    return f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _frames(tb: types.TracebackType | None) -> list[inspect.FrameInfo | Any]:
    import traceback

    return list(traceback.extract_tb(tb)) if tb is not None else []


def user_error(owner: str, method: str, exc: BaseException) -> PluginError:
    """The one-line error of `exc` raised by `owner.method` (to be raised `from exc`)."""
    if isinstance(exc, PluginError):
        return exc
    message = str(exc)
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return PluginError(_one_line(f"{owner}.{method} raised {what}{_where(exc)}"))


def _load_file(path: Path, name: str) -> types.ModuleType:
    import importlib.util

    key = f"critmem_user_{abs(hash(str(path)))}"
    cached = sys.modules.get(key)
    if cached is not None and getattr(cached, "__file__", None) == str(path):
        return cached
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"{name}: {path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[key]
        raise user_error(path.name, "<module>", e) from e
    return module


def _import(kind: Kind, name: str) -> object:
    module_part, _, attr = name.partition(":")
    noun = _NOUN[kind]
    if not module_part or not attr:
        raise PluginError(f'{noun} `{name}`: write a Python class as "file.py:Class" or "package.module:Class"')
    if module_part.endswith(".py"):
        path = Path(module_part)
        if not path.is_absolute():
            path = (_base_dir.get() or Path.cwd()) / path
        if not path.is_file():
            raise PluginNotFound(f"{noun} `{name}`: no file {path}")
        module: object = _load_file(path.resolve(), name)
    else:
        import importlib

        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as e:
            raise PluginNotFound(f"{noun} `{name}`: no module {module_part!r} ({_one_line(str(e))})") from e
        except Exception as e:
            raise user_error(module_part, "<module>", e) from e
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PluginNotFound(f"{noun} `{name}`: {module_part} has no attribute {part!r}")
        obj = getattr(obj, part)
    return obj


def resolve(kind: Kind, name: str) -> type:
    """The class `name` names: `file.py:Class`, `package.module:Class`, or an entry point of
    `kind`'s group."""
    noun = _NOUN[kind]
    if ":" in name:
        obj = _import(kind, name)
    else:
        found = entry_points(kind).get(name)
        if found is None:
            raise PluginNotFound(f"unknown {noun} `{name}`; {_known(kind)}")
        try:
            obj = found.load()
        except Exception as e:
            raise user_error(found.value, "<module>", e) from e
    if not isinstance(obj, type):
        raise PluginError(f"{noun} `{name}` is a {type(obj).__name__}, not a class")
    return obj


def _registered_instance(name: str) -> object | None:
    """The instance `name` registered (`register_object`), or None."""
    prefix = f"{__name__}:REGISTERED."
    if not name.startswith(prefix):
        return None
    obj = getattr(REGISTERED, name[len(prefix) :], None)
    return None if obj is None or isinstance(obj, type) else obj


# Classes and instances handed over from Python (`critmem.run(..., controller=...)`), named
# "critmem.plugins:REGISTERED.<kind>_<n>" so that the scenario loader resolves them as any class.
REGISTERED = types.SimpleNamespace()
_registered_names: dict[int, str] = {}


def register_object(kind: Kind, obj: object) -> str:
    """The name a scenario gives `obj` (a class, or an instance used as it is)."""
    key = id(obj)
    name = _registered_names.get(key)
    if name is None or getattr(REGISTERED, name.rsplit(".", 1)[1], None) is not obj:
        attr = f"{kind}_{len(_registered_names)}"
        setattr(REGISTERED, attr, obj)
        name = f"{__name__}:REGISTERED.{attr}"
        _registered_names[key] = name
    return name


def _known(kind: Kind) -> str:
    builtin: list[str] = []
    from critmem import _core

    if kind == "controllers":
        builtin = [n for n, _ in _core.controllers()]
    elif kind == "schedulers":
        builtin = [n for n, _ in _core.schedulers()]
    else:
        builtin = [n for n, _ in _core.memory_schedulers()]
    installed = sorted(entry_points(kind))
    names = ", ".join(builtin + installed)
    python = 'a Python class: "file.py:Class" or "package.module:Class"'
    return f"use one of: {names} (or {python})" if names else f"name {python}"


def _matches(value: object, hint: object) -> bool | None:
    """Whether `value` fits annotation `hint`; None where the hint is not a simple one."""
    import types
    import typing

    if hint is Any:
        return True
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is bool:
        return isinstance(value, bool)
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        answers = [_matches(value, h) for h in typing.get_args(hint)]
        return True if any(answers) else (None if None in answers else False)
    if origin in (list, tuple) or hint in (list, tuple):
        return isinstance(value, list | tuple)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    return None


def _hint_name(hint: object) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def instantiate(kind: Kind, name: str, params: Mapping[str, Any]) -> Any:
    """An instance of `name`'s class built with `params` as keyword arguments, each checked
    against the constructor's annotations where they are simple types."""
    import inspect
    import typing

    instance = _registered_instance(name)
    if instance is not None:
        if params:
            raise PluginError(f"{_NOUN[kind]} {type(instance).__qualname__}: an instance takes no config")
        return instance
    cls = resolve(kind, name)
    noun = _NOUN[kind]
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        signature = None
    try:
        hints = typing.get_type_hints(getattr(cls, "__init__"))  # noqa: B009 — mypy refuses cls.__init__
    except Exception:  # noqa: BLE001 — annotations the checker cannot evaluate are not checked
        hints = {}
    if signature is not None:
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
        for key, value in params.items():
            if key not in signature.parameters and not accepts_any:
                known = ", ".join(p for p in signature.parameters if p not in ("self", "args", "kwargs")) or "none"
                raise PluginError(f"{noun} `{name}`: unknown parameter {key!r} (its parameters: {known})")
            hint = hints.get(key)
            if hint is not None and _matches(value, hint) is False:
                raise PluginError(f"{noun} `{name}`: parameter {key!r} must be {_hint_name(hint)}, got {value!r}")
        try:
            signature.bind(**params)
        except TypeError as e:
            raise PluginError(f"{noun} `{name}`: {_one_line(str(e))}") from e
    try:
        return cls(**params)
    except Exception as e:
        raise user_error(cls.__qualname__, "__init__", e) from e


def _params(params_json: str, noun: str, name: str) -> dict[str, Any]:
    params = json.loads(params_json)
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise PluginError(f"{noun} `{name}`: its config must be a table of keyword arguments")
    return params


def owner_name(obj: object) -> str:
    return type(obj).__qualname__


# -- Controllers: what the simulator's binding and the Linux host call ---------------------


def build_controller(name: str, params_json: str) -> tuple[Any, str, int]:
    """(instance, display name, tick interval in ns) of controller `name`; PluginError when it
    cannot run (no class, no `tick` method, parameters that do not fit)."""
    try:
        instance = instantiate("controllers", name, _params(params_json, "controller", name))
    except PluginError as e:
        registered = getattr(REGISTERED, name.rsplit(".", 1)[-1], None) if name.startswith(f"{__name__}:REGISTERED.") else None
        if registered is None:
            raise
        # Handed over as an object: named by its class, not by its registration.
        shown = (registered if isinstance(registered, type) else type(registered)).__qualname__
        raise type(e)(str(e).replace(name, shown)) from e.__cause__
    tick = getattr(instance, "tick", None)
    if not callable(tick):
        raise PluginError(f"controller {name!r}: {owner_name(instance)} has no method tick(observation)")
    from critmem.controller import Controller

    if isinstance(instance, Controller) and type(instance).tick is Controller.tick:
        raise PluginError(f"controller {name!r}: {owner_name(instance)} does not implement tick(observation)")
    interval_ns = getattr(instance, "interval_ns", None)
    if interval_ns is None:
        from critmem.controller import DEFAULT_INTERVAL_NS

        interval_ns = DEFAULT_INTERVAL_NS
    if isinstance(interval_ns, bool) or not isinstance(interval_ns, int) or interval_ns <= 0:
        raise PluginError(f"controller {name!r}: interval_ns must be a positive whole number of ns, got {interval_ns!r}")
    display = getattr(instance, "name", None)
    if not isinstance(display, str) or not display:
        display = type(instance).__qualname__ if name.startswith(f"{__name__}:REGISTERED.") else name
    return instance, display, interval_ns


def controller_tick(instance: Any, observation_json: str) -> str:
    """One tick of a Python controller: the observation's JSON in, the actions' JSON out."""
    return json.dumps(controller_tick_wire(instance, json.loads(observation_json)))


def controller_tick_wire(instance: Any, observation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One tick of a Python controller on the observation's parsed JSON: the actions' JSON form."""
    from critmem.controller import ActionError, actions_to_wire, observation_from_wire

    typed = observation_from_wire(observation)
    try:
        actions = instance.tick(typed)
    except Exception as e:
        raise user_error(owner_name(instance), "tick", e) from e
    try:
        return actions_to_wire(actions)
    except ActionError as e:
        raise PluginError(f"{owner_name(instance)}.tick returned a bad action: {e}") from e


# -- CPU and memory schedulers: what the simulator's binding calls --------------------------


def scheduler_known(name: str) -> bool:
    """Whether `name` (no `module:Class`) is an installed entry point of `critmem.schedulers`."""
    return name in entry_points("schedulers")


def _tasks_from_wire(tasks_json: str) -> tuple[Any, ...]:
    from critmem.scheduler import Task

    return tuple(Task(**t) for t in json.loads(tasks_json))


_SCHEDULER_METHODS = ("on_ready", "on_remove", "choose")


def _scheduler_class(name: str) -> type:
    """The class `name` names, with the methods a scheduler needs; PluginNotFound otherwise
    (the scenario's name is at fault, not its config)."""
    from critmem.scheduler import Scheduler

    cls = resolve("schedulers", name)
    for method in _SCHEDULER_METHODS:
        own = getattr(cls, method, None)
        if not callable(own) or own is getattr(Scheduler, method):
            raise PluginNotFound(f"scheduler `{name}`: {cls.__qualname__} does not implement {method}")
    return cls


def build_scheduler(name: str, config_json: str, tasks_json: str, cpus: int) -> tuple[Any, str, bool]:
    """(instance, display name, whether it asks to be woken) of scheduler `name`, built with
    `config` and set up with the task table and its CPU count."""
    from critmem.scheduler import overrides

    cls = _scheduler_class(name)
    instance = instantiate("schedulers", name, _params(config_json, "scheduler", name))
    setup = getattr(instance, "setup", None)
    if callable(setup):
        try:
            setup(_tasks_from_wire(tasks_json), cpus)
        except Exception as e:
            raise user_error(cls.__qualname__, "setup", e) from e
    display = getattr(instance, "name", None)
    if not isinstance(display, str) or not display:
        display = name
    wakes = callable(getattr(instance, "next_wakeup_ns", None)) and overrides(instance, "next_wakeup_ns")
    return instance, display, wakes


def check_scheduler(name: str, config_json: str, tasks_json: str, cpus: int) -> tuple[str, str] | None:
    """None when scheduler `name` builds; else which scenario key is at fault (`"kind"`: the
    name, `"config"`: its parameters or its constructor) and the one-line reason."""
    try:
        _scheduler_class(name)
    except PluginError as e:
        return ("kind", str(e))
    try:
        build_scheduler(name, config_json, tasks_json, cpus)
    except PluginError as e:
        return ("config", str(e))
    return None


def scheduler_ready(instance: Any, job: tuple[int, int, int, int, int, tuple[int, int] | None]) -> None:
    from critmem.scheduler import Inherited, Job

    key, task, seq, release_ns, abs_deadline_ns, donor = job
    inherited = None if donor is None else Inherited(donor[0], donor[1])
    try:
        instance.on_ready(Job(key, task, seq, release_ns, abs_deadline_ns, inherited))
    except Exception as e:
        raise user_error(owner_name(instance), "on_ready", e) from e


def scheduler_remove(instance: Any, job_key: int) -> None:
    try:
        instance.on_remove(job_key)
    except Exception as e:
        raise user_error(owner_name(instance), "on_remove", e) from e


def scheduler_choose(instance: Any, now_ns: int, current: list[int | None]) -> list[int | None]:
    """The assignment `choose` returns, as a list of job keys or None; its length and keys
    the binding checks against the CPUs and the ready jobs."""
    try:
        answer = instance.choose(now_ns, current)
    except Exception as e:
        raise user_error(owner_name(instance), "choose", e) from e
    try:
        out = list(answer)
    except TypeError:
        raise PluginError(f"{owner_name(instance)}.choose returned {type(answer).__name__}, not a sequence of job keys") from None
    for cpu, key in enumerate(out):
        if key is not None and (isinstance(key, bool) or not isinstance(key, int)):
            raise PluginError(f"{owner_name(instance)}.choose returned {key!r} for CPU {cpu}: give a job key (int) or None")
    return out


def scheduler_next_wakeup(instance: Any, now_ns: int) -> int | None:
    try:
        at = instance.next_wakeup_ns(now_ns)
    except Exception as e:
        raise user_error(owner_name(instance), "next_wakeup_ns", e) from e
    if at is not None and (isinstance(at, bool) or not isinstance(at, int) or at < 0):
        raise PluginError(f"{owner_name(instance)}.next_wakeup_ns returned {at!r}: give a time in ns (int) or None")
    return at


def build_memory_scheduler(name: str, config_json: str) -> tuple[Any, str]:
    """(instance, display name) of memory scheduler `name`; PluginError when it cannot run."""
    from critmem.memory_scheduler import MemoryScheduler

    cls = resolve("memory_schedulers", name)
    schedule = getattr(cls, "schedule", None)
    if not callable(schedule) or schedule is MemoryScheduler.schedule:
        raise PluginNotFound(f"memory scheduler `{name}`: {cls.__qualname__} does not implement schedule(observation)")
    instance = instantiate("memory_schedulers", name, _params(config_json, "memory scheduler", name))
    display = getattr(instance, "name", None)
    if not isinstance(display, str) or not display:
        display = name
    return instance, display


def memory_schedule(instance: Any, observation_json: str) -> str:
    """One run of a Python memory scheduler: the observation's JSON in, the allocations' out."""
    from critmem.memory_scheduler import AllocationError, allocations_to_wire, observation_from_wire

    observation = observation_from_wire(json.loads(observation_json))
    try:
        answer = instance.schedule(observation)
    except Exception as e:
        raise user_error(owner_name(instance), "schedule", e) from e
    try:
        return json.dumps(allocations_to_wire(answer, len(observation.caches)))
    except AllocationError as e:
        raise PluginError(f"{owner_name(instance)}.schedule returned a bad allocation: {e}") from e
