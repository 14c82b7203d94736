"""``napkin calibrate``: fit a few of a stack's values to measured runs and write the result as a user stack.

The runs file (YAML) names the stack to start from, the stack to write, the values to fit and the runs::

    stack: torchtitan            # the stack to start from (default: megatron-core)
    name: my-titan               # the stack to write (or --name)
    fit: [matmul_efficiency]     # the free values (napkin.fit.FREE); default matmul_efficiency
    runs:
      - name: 8b on 64 GPUs      # a label (optional)
        model: llama3-8b         # everything ``napkin step`` takes, as its keywords
        cluster: dgx-h100
        gpus: 64
        global_batch: 128
        micro_batch: 2
        recompute: selective
        step_seconds: 2.9        # or tokens_per_second (the whole run), or tokens_per_second_per_gpu

A run's layout is given by step's keywords (``tensor_parallel: 8``) or as ``layout:``, a mapping of ``Layout``'s
fields as ``napkin step --json`` writes them; a field by its old name (``tensor``) is read with a note.

Every run is set up exactly as ``napkin step`` would (``api.step_setup``); ``napkin.fit`` finds the values; the
new stack is the base stack's file with those values and their source replaced, written atomically to the
user's stack directory, never over an existing file without ``force``. The result gives each run's residual
before and after, and with three runs or more each run's error when the others alone are fitted (leave one
out). Bad input is a ``UsageError`` naming the field (``runs[2].step_seconds``).
"""

from __future__ import annotations

import math
import re
from datetime import date
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import Field

from napkin.api.calibration_inputs import MEASURES, bad, check_possible, layout_of, measured, read_runs
from napkin.domain.base import Record
from napkin.engines import fit as engine
from napkin.errors import NapkinError, UsageError
from napkin.io.files import write_atomic
from napkin.results.result import Result
from napkin.systems.stack import STACKS, Stack
from napkin.units import format_duration


class RunFit(Record):
    """One measured run against the stack before and after the fit."""

    name: str
    measured_seconds: float
    before_seconds: float
    after_seconds: float
    leave_one_out_seconds: float | None = None

    @property
    def error(self) -> float:
        """Predicted / measured throughput − 1, after the fit."""
        return self.measured_seconds / self.after_seconds - 1

    @property
    def error_before(self) -> float:
        return self.measured_seconds / self.before_seconds - 1

    @property
    def loo_error(self) -> float | None:
        loo = self.leave_one_out_seconds
        return None if loo is None else self.measured_seconds / loo - 1


class CalibrationResult(Result):
    """``napkin calibrate``: the fitted values, the stack written, and every run's residual."""

    title: ClassVar[str] = "Calibration"
    headline: ClassVar[tuple[str, ...]] = ("stack", "fitted", "path")

    stack: str = Field(description="the stack written")
    base: str = Field(description="the stack it started from")
    path: str = Field(description="where the new stack was written")
    before: dict[str, float] = Field(description="the base stack's values of the fitted names")
    fitted: dict[str, float]
    runs: list[RunFit]
    mean_abs_error: float = Field(description="mean |predicted / measured tokens per second − 1| after the fit")
    leave_one_out_mean_abs_error: float | None = Field(
        default=None, description="the same with each run predicted by a fit to the others (3 runs or more)"
    )

    def heading(self) -> str:
        return f"Calibration: {self.stack} from {self.base}, fitted to {len(self.runs)} runs"

    def rows(self) -> list[tuple[str, str]]:
        rows = [(name, f"{self.before[name]:.4g} → {value:.4g}") for name, value in self.fitted.items()]
        for r in self.runs:
            loo = f", left out {r.loo_error:+.1%}" if r.loo_error is not None else ""
            rows.append(
                (
                    r.name,
                    f"measured {format_duration(r.measured_seconds)}: {r.error_before:+.1%} before, "
                    f"{r.error:+.1%} after{loo}",
                )
            )
        rows.append(
            (
                "mean |error|",
                f"{self.mean_abs_error:.1%} after the fit"
                + (
                    f"; {self.leave_one_out_mean_abs_error:.1%} left out"
                    if self.leave_one_out_mean_abs_error is not None
                    else ""
                ),
            )
        )
        rows.append(("written", f"{self.stack}.yaml, your stacks directory ('napkin stack path')"))
        return rows

    def caption(self) -> str:
        left_out = (
            "; 'left out': each run predicted by values fitted to the other runs"
            if self.leave_one_out_mean_abs_error is not None
            else ""
        )
        return f"use it with --stack {self.stack}; error = predicted / measured tokens per second − 1{left_out}"

    def to_json(self, explain: bool = False) -> Any:
        data = super().to_json(explain)
        data["runs"] = [
            {
                **r.model_dump(mode="json"),
                "error": r.error,
                "error_before": r.error_before,
                "leave_one_out_error": r.loo_error,
            }
            for r in self.runs
        ]
        return data


def calibrate(
    runs_file: str | Path,
    *,
    stack: str | None = None,
    name: str | None = None,
    fit: str | list[str] | None = None,
    force: bool = False,
    today: str | None = None,
) -> CalibrationResult:
    """Fit ``fit`` (names, or one comma-separated string; default the file's, else matmul_efficiency) of ``stack``
    (default the file's, else megatron-core) to the measured runs of ``runs_file``; write the result as the user
    stack ``name``, never over an existing file without ``force``."""
    from napkin.api.planning import step_setup
    from napkin.api.system_inputs import get_stack
    from napkin.systems.profiles import SLUG_RULE, is_builtin_name, is_slug

    spec, label = read_runs(runs_file)
    given = [n.strip() for n in fit.split(",") if n.strip()] if isinstance(fit, str) else fit
    names = given or spec.fit or ["matmul_efficiency"]
    for n in names:
        if n not in engine.FREE:
            raise UsageError(
                f"fit: {n!r} is not a value napkin can fit; use: {', '.join(engine.FREE)}",
                field="fit" if given else "runs_file",  # the keyword's value, or the file's
            )
    names = list(dict.fromkeys(names))
    new_name = name or spec.name
    at_fault = "name" if name else "runs_file"
    if new_name is None:
        raise UsageError(
            "name: which stack should the fit be written as? Give it here, or as name: in the runs file", field="name"
        )
    if not is_slug(new_name):
        raise UsageError(f"name: {new_name!r}: {SLUG_RULE}", field=at_fault)
    builtin = is_builtin_name(new_name, STACKS)
    if builtin is not None and not force:
        raise UsageError(
            f"name: {new_name!r} is the built-in stack {builtin}'s name; pick another, or force",
            field=at_fault,
            also=("force",),
        )
    if len(spec.runs) <= len(names):
        raise bad(
            f"runs: {len(spec.runs)} run(s) for {len(names)} value(s) to fit; give more runs than values "
            "(a fit to as many runs as values has no residual to check it by)"
        )
    try:
        base = get_stack(stack or spec.stack)
    except UsageError as exc:
        if stack is not None or spec.stack is None:
            raise
        raise bad(f"stack: {str(exc).removeprefix(f'{exc.field}: ')}") from None
    observations, setups = [], []
    notes: list[str] = list(base.origin_notes)
    for i, raw in enumerate(spec.runs):
        if not isinstance(raw, dict):
            raise bad(f"runs[{i}]: each run is a mapping of napkin step's keywords")
        options = {k: v for k, v in raw.items() if k not in (*MEASURES, "name")}
        for reserved in ("stack", "stack_file"):
            if reserved in options:
                raise bad(f"runs[{i}].{reserved}: every run uses the file's stack")
        if isinstance(options.get("layout"), dict):
            options["layout"] = layout_of(options["layout"], f"runs[{i}].layout", notes)
        try:
            sm, knobs, chosen, _ = step_setup(**options, stack=base)
        except UsageError as exc:
            where = f"runs[{i}].{exc.field}" if exc.field else f"runs[{i}]"
            raise bad(f"{where}: {str(exc).removeprefix(f'{exc.field}: ')}") from None
        except TypeError as exc:
            unknown = re.search(r"unexpected keyword argument '([^']+)'", str(exc))
            if unknown is None:
                raise bad(f"runs[{i}]: {exc}") from None
            raise bad(
                f"runs[{i}].{unknown.group(1)}: unknown field; a run takes napkin step's keywords (model, gpus, "
                "layout, global_batch, ...), a name, and step_seconds, tokens_per_second or tokens_per_second_per_gpu"
            ) from None
        notes.extend(n for n in chosen.notes if n not in notes)  # a replaced built-in, a config's assumptions
        seconds = measured(raw, i, sm.batch * sm.seq, knobs.layout().gpus)
        check_possible(raw, i, sm, knobs, seconds)
        label_i = str(raw.get("name", f"run {i + 1}"))
        observations.append(engine.Observation(label_i, _predictor(sm, knobs), seconds))
        setups.append(sm)
    start = setups[0].stack
    fitted = engine.fit(start, names, observations)
    _check_bounds(fitted, observations, start)
    after = engine.predictions(start, fitted, observations)
    before = [o.predict(start) for o in observations]
    loo = engine.leave_one_out(start, names, observations) if len(observations) >= 3 else [None] * len(observations)
    runs = [
        RunFit(
            name=o.name,
            measured_seconds=o.measured_seconds,
            before_seconds=b,
            after_seconds=a,
            leave_one_out_seconds=lo,
        )
        for o, b, a, lo in zip(observations, before, after, loo, strict=True)
    ]
    day = today or date.today().isoformat()
    text = stack_text(base, fitted, new_name, f"{Path(label).name} ({len(runs)} runs, {day})")
    target = STACKS.user_dir() / f"{new_name}.yaml"
    STACKS.parse(text, str(target))
    write_atomic(target, text, overwrite=force)
    errors = [abs(r.error) for r in runs]
    loo_errors = [abs(e) for r in runs if (e := r.loo_error) is not None]
    return CalibrationResult(
        stack=new_name,
        base=base.name,
        path=str(target),
        before={n: engine.current(start, n) for n in names},
        fitted=fitted,
        runs=runs,
        mean_abs_error=sum(errors) / len(errors),
        leave_one_out_mean_abs_error=sum(loo_errors) / len(loo_errors) if loo_errors else None,
        notes=notes,
    )


def _predictor(sm: Any, knobs: Any) -> engine.Predict:
    """A run's predicted step seconds under other stack values."""

    def predict(values: Any) -> float:
        return float(sm.with_stack(values).evaluate(knobs).step_seconds)

    return predict


def _check_bounds(fitted: dict[str, float], runs: list[engine.Observation], start: Any) -> None:
    """A value pinned at its bound cannot explain the runs: say which way they are off, and write nothing."""
    for n, value in fitted.items():
        _, lo, hi, _ = engine.FREE[n]
        at = (
            "upper"
            if math.isclose(value, hi, rel_tol=1e-3)
            else "lower"
            if math.isclose(value, lo, abs_tol=1e-3 * (hi - lo))
            else None
        )
        if at is None:
            continue
        worst = max(runs, key=lambda o: abs(math.log(o.predict(engine.knobs_with(start, fitted)) / o.measured_seconds)))
        off = worst.predict(engine.knobs_with(start, fitted)) / worst.measured_seconds - 1
        raise NapkinError(
            f"cannot fit: {n} reached its {at} bound ({value:.4g}) and the runs are still off "
            f"(worst: {worst.name}, {off:+.1%}); fit other values (--fit), or check the runs' "
            "layouts and stack"
        )


def stack_text(base: Stack, fitted: dict[str, float], name: str, where: str) -> str:
    """``base`` as a stack file named ``name``, the fitted values in and their source saying where from."""
    data = base.model_dump(mode="json", exclude_none=True)
    data["name"], data["aliases"] = name, []
    data["display_name"] = f"{base.display_name}, calibrated ({name})"
    training = data["training"]
    for n, value in fitted.items():
        path = engine.FREE[n][3]
        if path == "attention":
            att = training["attention"]
            att["forward_efficiency"] = min(1.0, att["forward_efficiency"] * value)
            att["backward_efficiency"] = min(1.0, att["backward_efficiency"] * value)
            att["devices"] = {
                d: [min(1.0, f * value), min(1.0, b * value)] for d, (f, b) in att.get("devices", {}).items()
            }
        else:
            section = training
            *parents, leaf = path.split(".")
            for part in parents:
                section = section[part]
            section[leaf] = float(f"{value:.4g}")  # four significant digits: 0.000964 stays 0.000964
        training["sources"][path] = f"fitted by napkin calibrate to {where}"
    header = (
        f"# yaml-language-server: $schema=schema.json\n# Written by 'napkin calibrate' from the stack "
        f"{base.name}, fitted to {where}.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)


__all__ = ["CalibrationResult", "calibrate", "read_runs", "stack_text"]
