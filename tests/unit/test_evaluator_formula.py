# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Operator formulas: what they may do, and hostile inputs refused at construction or evaluation."""

import math

import pytest

from fluidvim.evaluator.formula import FORMULA_VARIABLES, MAX_LENGTH, FormulaError, SafeFormula

V = {"slots", "price_per_hour", "queuing_delay_s", "power_w"}


def test_arithmetic_functions_and_conditionals():
    f = SafeFormula("slots / max(price_per_hour, 0.01) - 0.5 * min(queuing_delay_s, 10)", V)
    assert f.evaluate(slots=100, price_per_hour=2, queuing_delay_s=0.06,
                      power_w=3) == pytest.approx(50 - 0.03)
    assert f.names == {"slots", "price_per_hour", "queuing_delay_s"}
    g = SafeFormula("clamp(log(slots + 1, 2), 0, 5) + sqrt(abs(power_w)) "
                    "+ (1 if queuing_delay_s < inf else -1) + 2 ** 3 + floor(7 / 2) + slots % 3", V)
    assert g.evaluate(slots=63, power_w=-16, queuing_delay_s=math.inf) == pytest.approx(
        5 + 4 - 1 + 8 + 3 + 0)
    assert SafeFormula("not (slots > 3 and power_w <= 1)", V).evaluate(slots=4, power_w=1) == 0.0


def test_default_variables_are_the_analyzers():
    f = SafeFormula("slots * session_pps / deadline_ms")
    assert f.variables == frozenset(FORMULA_VARIABLES)


def test_unknown_names_are_named_with_the_allowed_ones():
    with pytest.raises(FormulaError) as e:
        SafeFormula("slots * cost_per_watt + foo", V)
    msg = str(e.value)
    assert "cost_per_watt" in msg and "foo" in msg
    assert "price_per_hour" in msg and "clamp" in msg and "inf" in msg   # the allowed names


def test_unknown_function():
    with pytest.raises(FormulaError, match=r"unknown function 'open'.*functions: abs"):
        SafeFormula("open(1)", V)


@pytest.mark.parametrize("expr,why", [
    ("__import__('os').system('true')", "unknown function|not allowed|only numbers"),
    ("().__class__", "attribute access|not allowed"),
    ("slots.__class__.__mro__", "attribute access"),
    ("(lambda: 1)()", "lambda|unknown function"),
    ("[x for x in range(10**9)]", "ListComp|not allowed"),
    ("{1: 2}", "Dict|not allowed"),
    ("'a' * 10", "only numbers"),
    ("b'x'", "only numbers"),
    ("slots[0]", "subscripts"),
    ("(y := 3)", "assignment"),
    ("max(*[1, 2])", "not allowed|positional"),
    ("round(slots, ndigits=2)", "positional"),
    ("1j + slots", "only numbers"),
    ("max", "used as a value"),
    ("slots; price_per_hour", "syntax"),
    ("import os", "syntax"),
    ("", "empty"),
    ("slots +", "syntax"),
])
def test_hostile_or_invalid_formulas_refused_at_construction(expr, why):
    with pytest.raises(FormulaError, match=why):
        SafeFormula(expr, V)


def test_long_inputs_refused():
    with pytest.raises(FormulaError, match=f"at most {MAX_LENGTH}"):
        SafeFormula("slots + " * 1000 + "1", V)
    with pytest.raises(FormulaError, match="syntax nodes"):
        SafeFormula("+".join(["1"] * 600), V)          # short enough, too many nodes
    with pytest.raises(FormulaError):
        SafeFormula("'" + "a" * 100_000 + "'", V)


def test_huge_powers_are_errors_not_hangs():
    with pytest.raises(FormulaError, match="too large"):
        SafeFormula("9**9**9", V).evaluate()
    with pytest.raises(FormulaError, match="too large"):
        SafeFormula("10.0 ** 400", V).evaluate()
    with pytest.raises(FormulaError, match="too large"):
        SafeFormula("exp(slots)", V).evaluate(slots=10_000)
    with pytest.raises(FormulaError, match="too large|overflow|number"):
        SafeFormula("1" + "0" * 400 + " * 1", V).evaluate()


def test_evaluation_errors_are_clear():
    f = SafeFormula("slots / price_per_hour", V)
    with pytest.raises(FormulaError, match="divides by zero"):
        f.evaluate(slots=1, price_per_hour=0)
    with pytest.raises(FormulaError, match="needs values for price_per_hour"):
        f.evaluate(slots=1)
    with pytest.raises(FormulaError, match="must be a number"):
        f.evaluate(slots="1", price_per_hour=1)
    with pytest.raises(FormulaError, match="log of a non-positive"):
        SafeFormula("log(slots)", V).evaluate(slots=0)
    with pytest.raises(FormulaError, match="lo <= hi"):
        SafeFormula("clamp(slots, 5, 1)", V).evaluate(slots=0)
    with pytest.raises(FormulaError, match="takes 3 arguments"):
        SafeFormula("clamp(slots)", V).evaluate(slots=0)
    with pytest.raises(FormulaError, match="not a real number"):
        SafeFormula("(0 - 8) ** 0.5", V).evaluate()
    with pytest.raises(FormulaError, match="NaN"):
        SafeFormula("inf - inf", V).evaluate()


def test_variable_names_cannot_shadow_builtins():
    with pytest.raises(FormulaError, match="clash"):
        SafeFormula("max + 1", {"max"})


def test_not_a_string():
    with pytest.raises(FormulaError, match="must be a string"):
        SafeFormula(42, V)
