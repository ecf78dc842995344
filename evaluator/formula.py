# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Operator-supplied passive analyzer formulas, evaluated safely (never Python ``exec``/``eval``).

A formula is one arithmetic expression over named numbers, e.g.
``slots / max(price_per_hour, 0.01) - 0.5 * queuing_delay_s``. It is parsed with :mod:`ast` and
checked against a whitelist *when the formula is created* (so a bad formula is refused when the
operator configures it, not in the middle of a placement), then evaluated by ``simpleeval`` with
the same restrictions:

* numbers (int, float, True/False) only - no strings, bytes, lists, dicts, sets or comprehensions;
* operators ``+ - * / // % **``, comparisons, ``and or not``, ``x if c else y``;
* the functions in :data:`FUNCTIONS` only, called by name with positional arguments;
* names: the declared variables and the constants ``pi``, ``e``, ``inf``;
* no attribute access, no subscripts, no lambdas, no assignments;
* bounded size: at most :data:`MAX_LENGTH` characters and :data:`MAX_NODES` syntax nodes;
  ``**`` is computed in floating point with an exponent bounded by :data:`MAX_EXPONENT`, so
  ``9**9**9`` is an error, not a machine-eating integer.
"""

from __future__ import annotations

import ast
import math
import operator

import simpleeval

MAX_LENGTH = 2000
MAX_NODES = 400
MAX_EXPONENT = 1024


class FormulaError(ValueError):
    """A formula is not allowed or could not be evaluated; the message says why and how to fix it."""


def _clamp(x, lo, hi):
    if lo > hi:
        raise FormulaError(f"clamp(x, lo, hi) needs lo <= hi, got lo={lo}, hi={hi}")
    return min(max(x, lo), hi)


def _log(x, base=math.e):
    if x <= 0:
        raise FormulaError(f"log of a non-positive number ({x})")
    return math.log(x, base)


def _sqrt(x):
    if x < 0:
        raise FormulaError(f"sqrt of a negative number ({x})")
    return math.sqrt(x)


def _pow(a, b):
    a, b = float(a), float(b)
    if abs(b) > MAX_EXPONENT:
        raise FormulaError(f"exponent {b:g} is too large (at most {MAX_EXPONENT})")
    try:
        r = a ** b
    except OverflowError:
        raise FormulaError(f"{a:g} ** {b:g} is too large") from None
    except ZeroDivisionError:
        raise FormulaError(f"{a:g} ** {b:g} divides by zero") from None
    if isinstance(r, complex):
        raise FormulaError(f"{a:g} ** {b:g} is not a real number")
    return r


def _fixed_arity(fn, lo, hi):
    def wrapper(*args):
        if not lo <= len(args) <= hi:
            want = str(lo) if lo == hi else f"{lo}..{hi}"
            raise FormulaError(f"{fn.__name__.lstrip('_')}() takes {want} arguments, got {len(args)}")
        return fn(*args)
    wrapper.__name__ = fn.__name__
    return wrapper


def _min(*args):
    if not args:
        raise FormulaError("min() needs at least one argument")
    return min(args)


def _max(*args):
    if not args:
        raise FormulaError("max() needs at least one argument")
    return max(args)


FUNCTIONS = {
    "min": _min,
    "max": _max,
    "abs": _fixed_arity(abs, 1, 1),
    "log": _fixed_arity(_log, 1, 2),
    "log10": _fixed_arity(lambda x: _log(x, 10), 1, 1),
    "sqrt": _fixed_arity(_sqrt, 1, 1),
    "exp": _fixed_arity(lambda x: _pow(math.e, x), 1, 1),
    "floor": _fixed_arity(math.floor, 1, 1),
    "ceil": _fixed_arity(math.ceil, 1, 1),
    "round": _fixed_arity(round, 1, 2),
    "clamp": _fixed_arity(_clamp, 3, 3),
}
CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf}

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: _pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge}
_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
                  ast.Call, ast.Name, ast.Load, ast.Constant, ast.And, ast.Or,
                  *_BINOPS, *_UNARY, *_CMP)


#: the variables an operator formula may use (analyzers.FormulaAnalyzer; SafeFormula's default), all
#: numbers
FORMULA_VARIABLES = {
    "slots": "estimated session slots at the service's deadline/quantile (load probe; 0 if none)",
    "capacity_pps": "packets/s at which the service's tail latency meets its deadline",
    "has_load_probe": "1 if a load probe result exists, else 0",
    "boot_ms": "cold request->ready time, p50 (boot probe; inf if none)",
    "warm_boot_ms": "warm request->ready time, p50 (inf if the zone has no warm launches)",
    "price_per_hour": "price of one instance per hour in this zone/host",
    "price_per_slot": "price_per_hour / slots (inf if no slots)",
    "power_w": "marginal power of one more instance, watts (0 if unknown)",
    "power_per_slot_w": "power_w / slots (inf if no slots)",
    "queuing_delay_s": "expected time to a new slot on demand (inf if the zone cannot launch)",
    "free_slots": "free slots the zone/host reports now",
    "deadline_ms": "the service's per-packet latency deadline",
    "quantile": "the service's QoS quantile, e.g. 0.99",
    "session_pps": "packets/s one session of the service sends",
    "min_instances": "the service's minimum number of instances",
}


class SafeFormula:
    """A validated formula over ``variables``; ``evaluate(**values)`` returns a float.

    >>> SafeFormula("slots / max(price_per_hour, 1)", variables={"slots", "price_per_hour"}
    ...             ).evaluate(slots=10, price_per_hour=2)
    5.0
    """

    def __init__(self, expr: str, variables=None):
        if not isinstance(expr, str):
            raise FormulaError(f"a formula must be a string, got {type(expr).__name__}")
        if variables is None:
            variables = FORMULA_VARIABLES
        self.expr = expr.strip()
        self.variables = frozenset(variables)
        clash = self.variables & (set(FUNCTIONS) | set(CONSTANTS))
        if clash:
            raise FormulaError(f"variable names {sorted(clash)} clash with built-in names")
        if not self.expr:
            raise FormulaError("the formula is empty")
        if len(self.expr) > MAX_LENGTH:
            raise FormulaError(f"the formula is {len(self.expr)} characters long; at most "
                               f"{MAX_LENGTH} are allowed")
        try:
            tree = ast.parse(self.expr, mode="eval")
        except SyntaxError as e:
            raise FormulaError(f"syntax error in formula at column {e.offset}: {e.msg}") from None
        except (ValueError, RecursionError, MemoryError) as e:
            raise FormulaError(f"cannot parse the formula: {e}") from None
        self.names = self._validate(tree)

    def _allowed_text(self) -> str:
        return (f"allowed variables: {', '.join(sorted(self.variables)) or '(none)'}; "
                f"constants: {', '.join(sorted(CONSTANTS))}; "
                f"functions: {', '.join(sorted(FUNCTIONS))}")

    def _validate(self, tree) -> frozenset:
        nodes = list(ast.walk(tree))
        if len(nodes) > MAX_NODES:
            raise FormulaError(f"the formula has {len(nodes)} syntax nodes; at most {MAX_NODES}")
        unknown, used = set(), set()
        for node in nodes:
            where = f" at column {node.col_offset + 1}" if hasattr(node, "col_offset") else ""
            if not isinstance(node, _ALLOWED_NODES):
                what = {ast.Attribute: "attribute access", ast.Subscript: "subscripts",
                        ast.Lambda: "lambda", ast.NamedExpr: "assignment"}.get(
                            type(node), type(node).__name__)
                raise FormulaError(f"{what} is not allowed in a formula{where}; formulas are "
                                   "arithmetic over numbers: " + self._allowed_text())
            if isinstance(node, ast.Constant) and (
                    not isinstance(node.value, (int, float)) or isinstance(node.value, complex)):
                raise FormulaError(f"only numbers are allowed as constants{where}, got "
                                   f"{type(node.value).__name__}")
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                    name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                    raise FormulaError(f"unknown function {name!r}{where}; " + self._allowed_text())
                if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                    raise FormulaError(f"{node.func.id}() takes positional arguments only{where}")
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load) and node.id in FUNCTIONS and not any(
                        isinstance(p, ast.Call) and p.func is node for p in nodes):
                    raise FormulaError(f"function {node.id!r} used as a value{where}")
                if node.id not in FUNCTIONS and node.id not in CONSTANTS:
                    if node.id in self.variables:
                        used.add(node.id)
                    else:
                        unknown.add(node.id)
        if unknown:
            raise FormulaError(f"unknown name(s) {', '.join(sorted(unknown))} in formula; "
                               + self._allowed_text())
        return frozenset(used)

    def evaluate(self, **values) -> float:
        missing = sorted(n for n in self.names if n not in values)
        if missing:
            raise FormulaError(f"formula {self.expr!r} needs values for {', '.join(missing)}")
        names = dict(CONSTANTS)
        for n in self.names:
            v = values[n]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise FormulaError(f"variable {n!r} must be a number, got {v!r}")
            names[n] = v
        ev = simpleeval.SimpleEval(operators={**_BINOPS, **_UNARY, **_CMP}, functions=FUNCTIONS,
                                   names=names)
        try:
            result = ev.eval(self.expr)
        except FormulaError:
            raise
        except ZeroDivisionError:
            raise FormulaError(f"formula {self.expr!r} divides by zero with {values!r}") from None
        except (OverflowError, simpleeval.NumberTooHigh) as e:
            raise FormulaError(f"formula {self.expr!r} overflowed: {e}") from None
        except simpleeval.InvalidExpression as e:
            raise FormulaError(f"formula {self.expr!r} is not allowed: {e}") from None
        except (TypeError, ValueError) as e:
            raise FormulaError(f"formula {self.expr!r} failed: {e}") from None
        try:
            out = float(result)
        except (TypeError, ValueError, OverflowError):
            raise FormulaError(f"formula {self.expr!r} did not give a number ({result!r})") from None
        if math.isnan(out):
            raise FormulaError(f"formula {self.expr!r} gave NaN with {values!r}")
        return out

    def __repr__(self):
        return f"SafeFormula({self.expr!r})"
