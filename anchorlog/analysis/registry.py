"""The pass registry: every GE pass is one module in ``anchorlog.analysis`` that registers a plain function
``run(model, ctx) -> dict`` under GE's pass name. The function analyses (through rules in
``anchorlog/queries``), asks the rewriter in ``anchorlog.runtime`` to apply what the rules concluded, and
returns its report section (what changed and why)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anchorlog.errors import OptionError
from anchorlog.facts.graph import Model
from anchorlog.gcpause import paused_gc


@dataclass
class PassContext:
    """What a pass sees besides the model: GE option strings, the report being built, the rule engine."""

    options: dict[str, str] = field(default_factory=dict)
    engine: str = "sqlite"
    report: dict[str, Any] = field(default_factory=lambda: {"passes": [], "lint": []})
    progress: Callable[[str], None] = lambda msg: None
    # Shared state between passes of one pipeline run (e.g. a symbol table built once, later reused).
    state: dict[str, Any] = field(default_factory=dict)


PassFn = Callable[[Model, PassContext], dict]


@dataclass
class PassInfo:
    name: str
    fn: PassFn | None
    doc: str
    options: tuple[str, ...] = ()  # GE option keys this pass reads
    pipeline: tuple[str, ...] = ()  # for composite passes (o3, mem-conflict): the passes run in order


PASSES: dict[str, PassInfo] = {}

# Option key -> function that raises ValueError (with a readable reason) for a value the pass cannot use.
OptionValidator = Callable[[str], Any]
OPTION_VALIDATORS: dict[str, OptionValidator] = {}


def register(
    name: str, *, options: tuple[str, ...] | Mapping[str, OptionValidator | None] = (), doc: str = ""
) -> Callable[[PassFn], PassFn]:
    """Decorator: register ``fn`` as the pass ``name`` reading GE options ``options``.

    ``options`` is a tuple of keys, or a mapping key -> validator; a validator parses the value and raises
    ``ValueError`` when it is unusable, so that a bad value is refused before any pass runs."""

    def deco(fn: PassFn) -> PassFn:
        first_line = (fn.__doc__ or "").strip().split("\n", 1)[0]
        keys = tuple(options)
        if isinstance(options, Mapping):
            for key, check in options.items():
                if check is not None:
                    register_option_validator(key, check)
        PASSES[name] = PassInfo(name, fn, doc or first_line, keys)
        return fn

    return deco


def register_option_validator(key: str, check: OptionValidator) -> None:
    """Validate values of option ``key`` up front (``check`` raises ValueError for a bad value)."""
    OPTION_VALIDATORS[key] = check


def register_pipeline(name: str, passes: tuple[str, ...], doc: str) -> None:
    """Register a composite pass that runs ``passes`` in order (names may be registered later)."""
    PASSES[name] = PassInfo(name, None, doc, (), passes)


def load_all() -> dict[str, PassInfo]:
    """Import every module of ``anchorlog.analysis`` so their passes register themselves."""
    import anchorlog.analysis as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name != "registry":
            importlib.import_module(f"anchorlog.analysis.{mod.name}")
    return PASSES


def expand(names: list[str]) -> list[str]:
    """Flatten composite passes; unknown names raise :class:`OptionError` listing the known ones."""
    load_all()
    out: list[str] = []
    for n in names:
        info = PASSES.get(n)
        if info is None:
            raise OptionError(f"unknown pass {n!r}; known passes: {', '.join(sorted(PASSES))}", "--passes")
        if info.fn is None:
            out.extend(expand(list(info.pipeline)))
        else:
            out.append(n)
    return out


# GE session options that a whole compile carries but that no pass here reads: accepted so that a real
# option set can be handed over unchanged, documented so that nobody expects an effect.
COMPILE_OPTIONS: dict[str, str] = {
    "ge.variableMemoryMaxSize": "size of GE's variable memory pool; memory planning input, no effect on these passes",
    "ge.graphMemoryMaxSize": "size of GE's feature-map memory pool; memory planning input, no effect on these passes",
}


def known_options() -> set[str]:
    load_all()
    return {o for p in PASSES.values() for o in p.options} | set(COMPILE_OPTIONS)


def check_options(options: dict[str, str]) -> None:
    """Refuse unknown option keys (listing the known ones) and values their validator rejects."""
    known = known_options()
    for key, value in options.items():
        if key not in known:
            raise OptionError(
                f"unknown option {key!r}; known options: {', '.join(sorted(known)) or '(none)'}", "--option"
            )
        check = OPTION_VALIDATORS.get(key)
        if check is None:
            continue
        try:
            check(value)
        except (ValueError, TypeError) as exc:
            raise OptionError(f"bad value {value!r} for {key}: {exc}", "--option") from None


def run_passes(model: Model, names: list[str], ctx: PassContext) -> dict[str, Any]:
    """Run the passes ``names`` (composites expanded) over ``model`` in order; return the report.

    The cyclic collector stays paused across the whole list and what survives is settled unscanned at the end
    (:func:`~anchorlog.gcpause.paused_gc`): paused pass by pass, the objects one pass leaves alive were all
    scanned by the first young collection in the next one (0.1-0.15 s at 60 k nodes)."""
    check_options(ctx.options)
    with paused_gc(settle=True):
        for name in expand(names):
            ctx.progress(f"pass {name}")
            section = PASSES[name].fn(model, ctx)  # type: ignore[misc]
            ctx.report["passes"].append({"pass": name, **(section or {})})
    return ctx.report
