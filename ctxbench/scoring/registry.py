"""Which matchers, failure tagger and answer filters score a benchmark: read from its registered track.

A matcher is ``fn(answer: str, instance: dict) -> MatchResult`` where ``answer`` is the reply after the benchmark's
answer pipeline (:func:`ctxbench.scoring.pipeline.score_reply` runs both) and ``instance`` is the instance's row
from ``instances.parquet`` with ``gold`` (and ``accepted_answers`` where present) already parsed from JSON (without
``context``, which ``score`` never loads). Each
track declares its matchers (ordered ``{name: "module:function"}``, the first its primary score), its tagger and
the answer filters it adds (:class:`ctxbench.core.track.Track`); ``score`` runs every matcher of an instance's
benchmark on every ok response and writes one ``scores.parquet`` row per response × matcher. There is no default:
an instance of an unregistered benchmark, or of a track that declares no matcher, is an error naming it.

Judge prompts (:class:`ctxbench.scoring.judge.JudgePrompt`) are a registry too: the built-in ``rows`` prompt
(:data:`BUILTIN_JUDGE_PROMPTS`) and those tracks add (``Track.judge_prompts``, ``{name: "module:object"}``), looked
up by :func:`judge_prompt`; a track's prompt judges that track's instances only (:func:`judge_prompt_track`).
"""

from __future__ import annotations

from collections.abc import Callable

from ctxbench.core.errors import InputError
from ctxbench.core.track import find_track, get_track, resolve, tracks
from ctxbench.scoring.judge_base import JudgePrompt


def _track(benchmark: str | None):
    if benchmark is None or find_track(benchmark) is None:
        raise InputError(f"instances of benchmark {benchmark!r} cannot be scored: no track of that name is "
                         f"registered (registered: {', '.join(t.name for t in tracks())}); register the track that "
                         f"built them (ctxbench.core.track.register_track)")
    return get_track(benchmark)


def matchers_for(benchmark: str | None) -> list[str]:
    """Matcher names of a benchmark's track, the primary first. Raises InputError for an unregistered benchmark
    or a track that declares no matcher (named, with what to fix)."""
    t = _track(benchmark)
    if not t.matchers:
        raise InputError(f"track {t.name} declares no matcher: set `matchers` on its Track class (e.g. "
                         f"{{'exact_match': 'module:function'}}), the first being its primary score")
    return list(t.matchers)


def matcher(name: str, benchmark: str | None = None) -> Callable:
    """The matcher function ``name`` of ``benchmark``'s track. Without a benchmark, the matcher of that name
    every registering track agrees on. Raises InputError for a name the track (or no track) registers, and for a
    name tracks register differently when no benchmark is given."""
    if benchmark is not None:
        t = _track(benchmark)
        if name not in t.matchers:
            raise InputError(f"track {t.name} has no matcher {name!r} (its matchers: "
                             f"{', '.join(t.matchers) or 'none'})")
        return resolve(t.matchers[name], f"matcher {name!r} of track {t.name}")
    specs = {t.matchers[name]: t.name for t in tracks() if name in t.matchers}
    if not specs:
        known = sorted({m for t in tracks() for m in t.matchers})
        raise InputError(f"unknown matcher {name!r}; known: {', '.join(known)}")
    if len(specs) > 1:
        raise InputError(f"matcher {name!r} differs between tracks {', '.join(sorted(specs.values()))}: name the "
                         f"benchmark")
    spec = next(iter(specs))
    return resolve(spec, f"matcher {name!r}")


def tagger(benchmark: str | None) -> Callable | None:
    """The failure tagger of a benchmark's track (see :class:`ctxbench.core.track.Track`), or None."""
    t = _track(benchmark)
    return resolve(t.tagger, f"tagger of track {t.name}") if t.tagger else None


def answer_filters(benchmark: str | None) -> tuple[str, ...]:
    """Names of the answer filters a benchmark's track adds after the default chain."""
    return tuple(_track(benchmark).answer_filters)


def is_fallback(name: str, benchmark: str | None = None) -> bool:
    """Whether matcher ``name`` only approximates the benchmark's own scoring (its track's ``fallback_matchers``;
    without a benchmark: any track's)."""
    if benchmark is not None and find_track(benchmark) is not None:
        return name in get_track(benchmark).fallback_matchers
    return name in fallback_matchers()


def fallback_matchers() -> set[str]:
    """Every matcher name some track declares a fallback."""
    return {m for t in tracks() for m in t.fallback_matchers}


# the judge prompts every build may use (a track's own are in its Track.judge_prompts)
BUILTIN_JUDGE_PROMPTS: dict[str, str] = {"rows": "ctxbench.scoring.judge:ROW_JUDGE"}


def _judge_prompt_refs() -> dict[str, list[tuple[str, str | None]]]:
    refs: dict[str, list[tuple[str, str | None]]] = {n: [(r, None)] for n, r in BUILTIN_JUDGE_PROMPTS.items()}
    for t in tracks():
        for n, r in t.judge_prompts.items():
            refs.setdefault(n, []).append((r, t.name))
    return refs


def judge_prompt_names() -> list[str]:
    """Every registered judge prompt name: the built-in ones first, then the tracks' (sorted)."""
    refs = _judge_prompt_refs()
    return list(BUILTIN_JUDGE_PROMPTS) + sorted(n for n in refs if n not in BUILTIN_JUDGE_PROMPTS)


def _judge_prompt_entry(name: str) -> tuple[str, str | None]:
    refs = _judge_prompt_refs().get(name)
    if not refs:
        raise InputError(f"unknown judge prompt {name!r}; registered: {', '.join(judge_prompt_names())} (a track "
                         f"adds one with `judge_prompts` on its Track class)")
    if len({r for r, _ in refs}) > 1:
        raise InputError(f"judge prompt {name!r} is registered differently by "
                         f"{', '.join(sorted(t or 'ctxbench' for _, t in refs))}: rename one")
    return refs[0]


def judge_prompt(name: str):
    """The :class:`ctxbench.scoring.judge.JudgePrompt` registered as ``name``. Raises InputError for an unknown
    name (listing the registered ones), a name registered differently by two tracks, or a reference that does not
    name a JudgePrompt."""
    ref, owner = _judge_prompt_entry(name)
    obj = resolve(ref, f"judge prompt {name!r}" + (f" of track {owner}" if owner else ""))
    if isinstance(obj, type) and issubclass(obj, JudgePrompt):
        obj = obj()
    if not isinstance(obj, JudgePrompt) or getattr(obj, "name", None) != name:
        raise InputError(f"judge prompt {name!r} ({ref}) is not a JudgePrompt named {name!r}")
    return obj


def judge_prompt_track(name: str) -> str | None:
    """The track that registers judge prompt ``name`` (its prompt judges only that track's instances), or None
    for a built-in prompt. Raises InputError for an unknown name."""
    return _judge_prompt_entry(name)[1]


def registry_fingerprint() -> dict[str, dict]:
    """What the registry says about scoring, per track (matchers, tagger, answer filters, judge prompts): part of
    the inputs hash of ``score`` (:func:`ctxbench.run.incremental.score_inputs_hash`), beside the version and code of
    each of them (:func:`ctxbench.scoring.versions.scoring_fingerprint`)."""
    return {t.name: {"matchers": dict(t.matchers), "tagger": t.tagger, "answer_filters": list(t.answer_filters),
                     **({"judge_prompts": dict(t.judge_prompts)} if t.judge_prompts else {})}
            for t in tracks()}
