"""Command-line options generated from a pydantic configuration model (``ctxbench build <track>``).

Each field of a track's ``Config`` becomes one option, ``--field-name`` (or the track's CLI word for it), with the
field's ``description`` as help and its default as the option's default, the way inspect_ai turns task arguments
into ``-T`` options. Lists are written comma-separated (``--lengths 4096,8192``; integer lists accept the field's
``4k`` = 4,096 and ``1m`` = 1,048,576 tokens), booleans are ``--flag/--no-flag``, a ``Literal`` lists its choices.
The values are then validated by the Config itself, so the CLI, the Prefect form and the manifest agree.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Optional

import typer
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined


@dataclass(frozen=True)
class OptionSpec:
    """One CLI option of a config field: ``kind`` is ints, floats, words (comma lists), bool, int, float, str,
    choice or yaml (any other type, written as YAML); ``default`` the CLI default (lists comma-joined; ``...``
    when the field is required)."""

    field: str
    flag: str
    kind: str
    default: Any
    help: str
    choices: tuple[str, ...] = ()


def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _kind(tp: Any) -> tuple[str, tuple[str, ...]]:
    tp = _unwrap_optional(tp)
    origin = typing.get_origin(tp)
    if origin in (list, tuple, set, frozenset):
        (arg, *_) = typing.get_args(tp) or (str,)
        arg = _unwrap_optional(arg)
        return {int: "ints", float: "floats"}.get(arg, "words"), ()
    if origin is Literal:
        return "choice", tuple(str(a) for a in typing.get_args(tp))
    if tp is bool:
        return "bool", ()
    if tp in (int, float, str):
        return tp.__name__, ()
    return "yaml", ()


def option_specs(model: type[BaseModel], names: Mapping[str, str] | None = None,
                 hidden: frozenset[str] | set[str] = frozenset()) -> list[OptionSpec]:
    """One :class:`OptionSpec` per field of ``model`` not in ``hidden``; ``names`` maps a field to its CLI word
    where they differ (e.g. ``positions`` → ``position``)."""
    out = []
    for name, f in model.model_fields.items():
        if name in hidden:
            continue
        kind, choices = _kind(f.annotation)
        if f.is_required():
            default: Any = ...
        else:
            default = f.default_factory() if f.default_factory is not None else f.default  # type: ignore[call-arg]
            if default is PydanticUndefined:
                default = None
            if kind in ("ints", "floats", "words") and default is not None:
                default = ",".join(str(x) for x in default)
            elif kind == "yaml" and default is not None:
                default = yaml.safe_dump(default, default_flow_style=True).strip()
        help_ = (f.description or name.replace("_", " "))
        if choices:
            help_ += f" ({' | '.join(choices)})"
        elif kind in ("ints", "floats", "words"):
            help_ += " (comma-separated)"
        flag = (names or {}).get(name, name).replace("_", "-")
        out.append(OptionSpec(name, flag, kind, default, help_, choices))
    return out


_PY = {"int": int, "float": float, "bool": bool}


def parameters(specs: list[OptionSpec]) -> list[inspect.Parameter]:
    """Keyword parameters (typer options) for ``specs``, in order."""
    params = []
    for s in specs:
        tp: Any = _PY.get(s.kind, str)
        if s.default is None:
            tp = Optional[tp]
        decl = f"--{s.flag}/--no-{s.flag}" if s.kind == "bool" else f"--{s.flag}"
        params.append(inspect.Parameter(s.field, inspect.Parameter.KEYWORD_ONLY, annotation=tp,
                                        default=typer.Option(s.default, decl, help=s.help)))
    return params


def parse_ints(s: str, what: str) -> list[int]:
    """Comma-separated integers; ``4k`` = 4,096 and ``1m`` = 1,048,576 (the field's convention for tiers).
    Raises typer.BadParameter naming ``what``."""
    try:
        out = []
        for x in (x.strip().lower() for x in s.split(",") if x.strip()):
            out.append(int(x[:-1]) * 1024 if x.endswith("k") else int(x[:-1]) * 1024 * 1024 if x.endswith("m")
                       else int(x))
        return out
    except ValueError:
        raise typer.BadParameter(f"{what} must be comma-separated integers, e.g. 4096,8192 (got {s!r})") from None


def config_values(specs: list[OptionSpec], given: Mapping[str, Any]) -> dict[str, Any]:
    """The config dict for the CLI values ``given`` (by field): comma lists split and parsed, YAML read; a value
    left at None is left out (the Config's default applies). Raises typer.BadParameter naming the option, also for
    an empty list where the default is not empty (``--position ""``)."""
    out: dict[str, Any] = {}
    for s in specs:
        v = given.get(s.field)
        if v is None:
            continue
        if s.kind == "ints":
            v = parse_ints(v, f"--{s.flag}")
        elif s.kind == "floats":
            try:
                v = [float(x) for x in v.split(",") if x.strip()]
            except ValueError:
                raise typer.BadParameter(f"--{s.flag} must be comma-separated numbers, e.g. 0.25,0.5 (got {v!r})") \
                    from None
        elif s.kind == "words":
            v = [x.strip() for x in v.split(",") if x.strip()]
        if s.kind in ("ints", "floats", "words") and not v and s.default not in (None, "", ...):
            raise typer.BadParameter(f"--{s.flag} needs at least one value, e.g. {s.default}")
        elif s.kind == "yaml":
            try:
                v = yaml.safe_load(v)
            except yaml.YAMLError as e:
                raise typer.BadParameter(f"--{s.flag} is not readable YAML ({e})") from None
        out[s.field] = v
    return out
