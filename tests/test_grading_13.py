"""Exercise 13 can be failed, and passed by more than one route.

Every answer here is written as a learner writes it: a cell's source, run in a namespace
that holds the notebook's own setup cell (and, for q2, the solution's q1, which a q2 answer
may use), under `__main__` as in a kernel. Wrong answers fail the tests that name their
mistake, on several seeds, each with a message and a hint; answers right by another route
pass. The checks' own reference (durable_lite.costs, reached through a conversion) is
held to the lesson's formulas and to a simulation of crashing runs, and the drawn cases to
what they are drawn for. The solution and the untouched exercise are graded whole by
test_grading.py; here one notebook of wrong answers is.
"""

import linecache
import math
import random
import re

import nbformat
import pytest

from durable_lite.grading import checks, exercise
from durable_lite.grading.cases import Draw
from durable_lite.grading.exercises import ex13_costs as ex13
from durable_lite.grading.grader import grade_notebook

from grading_support import ROOT, failing_tests, learner, statuses

NAME = "13_costs"
SOLUTION = ROOT / "solutions" / f"{NAME}.ipynb"
SEEDS = (11, 22, 33)

NO_CRASH, ONE_STEP, RESUMED, FROM_THE_TOP = (t.name for t in ex13.q1.tests)
RARE, FREQUENT, FREE, NO_CRASHES, BOUNDARY = (t.name for t in ex13.q2.tests)
NONE, LONG, IRREVERSIBLE, WAITS, SEVERAL, LINE, ON_THE_LINE = (t.name for t in ex13.q3.tests)


def solution_cell(starts):
    nb = nbformat.read(SOLUTION, as_version=4)
    [source] = [c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith(starts)]
    return source


def answer(source, name, with_q1=False):
    """The function `name` defined by `source`, as a notebook cell below the setup (and,
    with_q1, below the solution's expected_cost) would define it."""
    given = [solution_cell("import dataclasses")]
    if with_q1:
        given.append(solution_cell("def expected_cost("))
    text = "\n\n".join(given + [source])
    filename = f"<ex13 cell {abs(hash(text))}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(text, filename, "exec"), namespace)
    return namespace[name]


QUESTION = {"q1": ("expected_cost", False), "q2": ("break_even_steps", True),
            "q3": ("reasons_for", False)}


def run(qid, source, seed):
    name, with_q1 = QUESTION[qid]
    return checks.run_question(exercise(NAME), qid, (answer(source, name, with_q1),), seed=seed)


def failing(result):
    return [t.name for t in result.tests if t.status != checks.PASSED]


def fails(qid, source, expected, seeds=SEEDS):
    """The answer fails exactly the tests `expected` names, on every seed, each with a
    message and a hint."""
    for seed in seeds:
        result = run(qid, source, seed)
        assert failing(result) == expected, f"seed {seed}:\n{result.report()}"
        for test in result.tests:
            if test.status != checks.PASSED:
                assert test.status == checks.FAILED and test.message and test.hint, test
    return result


def passes(qid, source, seeds=SEEDS):
    for seed in seeds:
        result = run(qid, source, seed)
        assert result.status == checks.PASSED, f"seed {seed}:\n{result.report()}"


# the reference and the cases ---------------------------------------------------------------
def by_hand(steps):
    """The lesson's formulas, written out: step j runs 1/p_j times resumed, and
    1/(p_j ... p_n) times from the top."""
    p = [1 - q for _, q in steps]
    top = sum(c / math.prod(p[j:]) for j, (c, _) in enumerate(steps))
    return top, sum(c / pj for (c, _), pj in zip(steps, p))


def simulate(steps, resumed, runs, rng):
    total = 0.0
    for _ in range(runs):
        j = 0
        while j < len(steps):
            total += steps[j][0]
            if rng.random() >= steps[j][1]:
                j += 1
            elif not resumed:
                j = 0
    return total / runs


def test_the_checks_reference_is_the_lessons_arithmetic_and_matches_crashing_runs():
    draw = Draw(5)
    for _ in range(20):
        steps = ex13.random_steps(draw, draw.randint(1, 9))
        assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(ex13.reference_cost(steps),
                                                                      by_hand(steps)))
    rng = random.Random(3)
    steps = [(2.0, 0.05), (10.0, 0.2), (0.5, 0.0), (4.0, 0.1)]
    for resumed, want in zip((False, True), ex13.reference_cost(steps)):
        runs = 20_000
        seen = simulate(steps, resumed, runs, rng)
        assert abs(seen - want) < 0.02 * want, (resumed, seen, want)


def test_the_break_even_reference_is_the_first_n_whose_checkpoints_pay():
    def counted(w, q, h):
        for n in range(1, 500):
            top, resumed = by_hand([(w, q)] * n)
            if top - resumed > n * h:
                return n
        return None

    draw = Draw(9)
    cases = ex13.rare_cases(draw) + ex13.frequent_cases(draw) + [(3.0, 0.1, 0.0), (3.0, 0.0, 1.0),
                                                                 (3.0, 0.0, 0.0)]
    for w, q, h in cases:
        assert ex13.reference_break_even(w, q, h) == counted(w, q, h), (w, q, h)


@pytest.mark.parametrize("seed", range(8))
def test_the_drawn_cases_are_what_each_test_says(seed):
    draw = Draw(seed)
    for w, q, h in ex13.rare_cases(draw):              # the rule holds; n for n - 1 does not
        n = ex13.reference_break_even(w, q, h)
        assert n * q <= 0.01 and n == ex13.rule_of_thumb(w, q, h)
        assert n != ex13.rule_of_thumb(w, q, h, minus_one=False)
    for w, q, h in ex13.frequent_cases(draw):          # the rule asks for more steps
        assert ex13.reference_break_even(w, q, h) < ex13.rule_of_thumb(w, q, h)
    for kind in ("seconds", "dollars", None):
        for irreversible in (False, True):
            for waits in (False, True):
                line = ex13.lines(draw)
                steps = ex13.workload(draw, *line, long_by=kind, irreversible=irreversible,
                                      waits=waits, many=kind != "dollars" and draw.random() < 0.5)
                want = {"long"} if kind else set()
                want |= {"irreversible"} if irreversible else set()
                want |= {"waits"} if waits else set()
                assert ex13.reference_reasons(steps, *line) == want
                # the same under the lesson's line: only the line's own test tells them apart
                assert ex13.reference_reasons(steps, 60.0, 1.0) == want
                assert len({s["name"] for s in steps}) >= 2


def test_the_checks_draw_new_cases_for_every_seed():
    wrong = "def expected_cost(steps):\n    return 504.1, 500.7\n"
    one, again, other = (run("q1", wrong, seed).tests[3].message for seed in (4, 4, 5))
    assert one == again != other


# q1 · expected_cost ----------------------------------------------------------------------------
Q1_SOLUTION = solution_cell("def expected_cost(")
RESUMED_OK = "resumed = sum(c / (1 - q) for c, q in steps)\n"


def q1_source(top, resumed=RESUMED_OK, prelude=""):
    return (f"{prelude}def expected_cost(steps):\n    {resumed}    from_the_top = {top}\n"
            "    return from_the_top, resumed\n")


Q1_WRONG = {
    # the lesson's nightly report, as printed
    "a literal from the lesson": ("def expected_cost(steps):\n    return 504.1, 500.7\n",
                                  [NO_CRASH, ONE_STEP, RESUMED, FROM_THE_TOP]),
    # every crash throws the whole run away, as if the later steps had run too
    "the whole run per crash": (q1_source(
        "sum(c for c, _ in steps) / math.prod(1 - q for _, q in steps)"), [FROM_THE_TOP]),
    # the product over the steps before j, not after
    "products the wrong way": (q1_source(
        "sum(c / math.prod(1 - q for _, q in steps[:j + 1]) for j, (c, _) in enumerate(steps))"),
        [FROM_THE_TOP]),
    # the steps after j only: completions (duplicates + 1), not attempts
    "(n - j) for (n - j + 1)": (q1_source(
        "sum(c / math.prod(1 - q for _, q in steps[j + 1:]) for j, (c, _) in enumerate(steps))"),
        [ONE_STEP, FROM_THE_TOP]),
    # checkpoints as if no crash happened: the interrupted step is never repeated
    "resumed costs a clean run": (q1_source(
        "sum(c / math.prod(1 - q for _, q in steps[j:]) for j, (c, _) in enumerate(steps))",
        resumed="resumed = sum(c for c, _ in steps)\n"), [ONE_STEP, RESUMED]),
    # 1 + q attempts, the series cut after its first term
    "1 + q attempts": (q1_source(
        "sum(c / math.prod(1 - q for _, q in steps[j:]) for j, (c, _) in enumerate(steps))",
        resumed="resumed = sum(c * (1 + q) for c, q in steps)\n"), [ONE_STEP, RESUMED]),
    # the cost resumed, given for both
    "both the same": (q1_source("resumed"), [FROM_THE_TOP]),
    # right numbers, wrong order
    "swapped": (Q1_SOLUTION.replace("return from_the_top, resumed", "return resumed, from_the_top"),
                [RESUMED, FROM_THE_TOP]),
    # the library's answer, through the conversion a learner can work out
    "costs.expected": ('''
def expected_cost(steps):
    workload = costs.Workload("mine", [costs.StepCost(str(i), -math.log1p(-q), dollars=c)
                                       for i, (c, q) in enumerate(steps)])
    return (costs.expected(workload, 3600, durable=False).dollars,
            costs.expected(workload, 3600, durable=True).dollars)
''', [NO_CRASH, ONE_STEP, RESUMED, FROM_THE_TOP]),
}


def test_q1_the_solution_passes():
    passes("q1", Q1_SOLUTION, seeds=SEEDS + (44, 55))


@pytest.mark.parametrize("mistake", sorted(Q1_WRONG))
def test_q1_a_wrong_answer_fails_the_tests_that_name_its_mistake(mistake):
    source, expected = Q1_WRONG[mistake]
    fails("q1", source, expected)


def test_q1_feedback_names_the_run_and_where_to_look_never_the_answer():
    result = run("q1", Q1_WRONG["the whole run per crash"][0], seed=3)
    test = result.tests[3]
    steps = [tuple(map(float, pair)) for pair in
             re.findall(r"\(([\d.]+), ([\d.]+)\)", test.message.split(" returned ")[0])]
    assert len(steps) >= 2 and test.message.startswith("expected_cost([(")
    top, resumed = ex13.reference_cost(steps)
    assert f"{top:g}" not in test.message and f"{top:.2f}" not in test.message
    assert "its first number, the average cost restarted from the top" in test.message
    assert "re-runs steps 1..j, not the whole run" in test.hint
    swapped = run("q1", Q1_WRONG["swapped"][0], seed=3).tests[2]
    assert "the wrong way round" in swapped.message and "(from_the_top, resumed)" in swapped.hint
    library = run("q1", Q1_WRONG["costs.expected"][0], seed=3).tests[0]
    assert "called durable_lite.costs (" in library.message and "expected" in library.message


Q1_RIGHT = {
    "products from scratch": q1_source(
        "sum(c / math.prod(1 - q for _, q in steps[j:]) for j, (c, _) in enumerate(steps))"),
    "attempts first, then costs": '''
def expected_cost(steps):
    n = len(steps)
    attempts_top, attempts_resumed = [], []
    for j in range(n):
        through = 1.0
        for k in range(j, n):
            through *= 1 - steps[k][1]
        attempts_top.append(1 / through)
        attempts_resumed.append(1 / (1 - steps[j][1]))
    costs_ = [c for c, _ in steps]
    return (sum(a * c for a, c in zip(attempts_top, costs_)),
            sum(a * c for a, c in zip(attempts_resumed, costs_)))
''',
    "a list, through logarithms": '''
def expected_cost(steps):
    logs = [math.log1p(-q) for _, q in steps]
    top = sum(c * math.exp(-math.fsum(logs[j:])) for j, (c, _) in enumerate(steps))
    return [top, math.fsum(c / (1 - q) for c, q in steps)]
''',
    # numpy, vectorised, returning an array
    "a numpy array": '''
import numpy as np


def expected_cost(steps):
    cost, q = np.array(steps, dtype=float).reshape(-1, 2).T
    through = np.cumprod((1 - q)[::-1])[::-1]          # (1 - q_j) * ... * (1 - q_n)
    return np.array([np.sum(cost / through), np.sum(cost / (1 - q))])
''',
    # a constant of costs read, no function of it called
    "costs' constants only": Q1_SOLUTION.replace("from_the_top = resumed = 0.0",
                                                 "from_the_top = resumed = 0.0 * costs.HOUR"),
}


@pytest.mark.parametrize("route", sorted(Q1_RIGHT))
def test_q1_a_right_answer_by_another_route_passes(route):
    passes("q1", Q1_RIGHT[route])


# q2 · break_even_steps -------------------------------------------------------------------------
Q2_SOLUTION = solution_cell("def break_even_steps(")


def q2_source(body):
    return f"def break_even_steps(w, q, h):\n    if q == 0:\n        return None\n{body}"


COUNT = '''    n = 1
    while True:
        from_the_top, resumed = expected_cost([(w, q)] * n)
        if {test}:
            return n
        n += 1
'''
Q2_WRONG = {
    # the lesson's tool call, as printed
    "a literal from the lesson": ("def break_even_steps(w, q, h):\n    return 25\n",
                                  [RARE, FREQUENT, FREE, NO_CRASHES, BOUNDARY]),
    # the rule of thumb, where crashes are not rare
    "the rule of thumb": (q2_source("    return math.floor(2 * h / (w * q)) + 2\n"),
                          [FREQUENT, BOUNDARY]),        # the boundary's crashes are frequent
    # the rule of thumb with n for n - 1: one step short
    "the rule with n, not n - 1": (q2_source("    return math.floor(2 * h / (w * q)) + 1\n"),
                                   [RARE, FREQUENT, FREE, NO_CRASHES, BOUNDARY]),
    # exact, but the checkpoints' own cost left out: "pays" as soon as anything is saved
    "checkpoints treated as free": (q2_source(COUNT.format(test="from_the_top - resumed > 0")),
                                    [RARE, FREQUENT, BOUNDARY]),
    # >= where it must be >: a one-step run "pays" when checkpoints are free
    "pays at a tie": (q2_source(COUNT.format(test="from_the_top - resumed >= n * h")),
                      [FREE, BOUNDARY]),
    # >= again, counted from two (a one-step run never pays): only a tie at h > 0 shows it
    "pays at a tie, from two steps": (q2_source(COUNT.format(
        test="from_the_top - resumed >= n * h").replace("n = 1", "n = 2")), [BOUNDARY]),
    # forgets that without crashes nothing pays: counts for ever
    "no None": (COUNT.format(test="from_the_top - resumed > n * h").replace(
        "    n = 1", "def break_even_steps(w, q, h):\n    n = 1", 1), [NO_CRASHES]),
    # the library's answer, through the conversion a learner can work out
    "costs.break_even_steps": (q2_source(
        "    return costs.break_even_steps(w, -math.log1p(-q) * 3600 / w, h, 0.0, 3600)\n"),
        [RARE, FREQUENT, FREE, NO_CRASHES, BOUNDARY]),
}


def test_q2_the_solution_passes():
    passes("q2", Q2_SOLUTION, seeds=SEEDS + (44, 55))


@pytest.mark.parametrize("mistake", sorted(set(Q2_WRONG) - {"no None"}))
def test_q2_a_wrong_answer_fails_the_tests_that_name_its_mistake(mistake):
    source, expected = Q2_WRONG[mistake]
    fails("q2", source, expected)


def test_q2_an_answer_that_never_returns_for_q_0_is_stopped_in_seconds():
    result = fails("q2", *Q2_WRONG["no None"], seeds=(7,))
    assert "had not returned after 3 s" in result.tests[3].message
    assert re.search(r"break_even_steps\(w=[\d.]+, q=0, h=[\d.]+\)", result.tests[3].message)


def test_q2_feedback_names_the_case_and_the_mistake_never_the_answer():
    rule = run("q2", Q2_WRONG["the rule of thumb"][0], seed=3).tests[1]
    w, q, h = map(float, re.match(r"break_even_steps\(w=([\d.e-]+), q=([\d.e-]+), h=([\d.e-]+)\)",
                                  rule.message).groups())
    n, told = ex13.reference_break_even(w, q, h), ex13.rule_of_thumb(w, q, h)
    assert rule.message.startswith(f"break_even_steps(w={w:g}, q={q:g}, h={h:g}) returned {told}, "
                                   f"but n = {told - 1} already pays")
    assert n < told - 1 and re.search(r"already pays: its checkpoints cost [\d.e+-]+ per run and "
                                      r"save more than that$", rule.message)   # no other number
    assert "made for rare crashes" in rule.hint
    short = run("q2", Q2_WRONG["the rule with n, not n - 1"][0], seed=3).tests[0]
    assert "save less than that" in short.message and "(n - 1) / 2" in short.hint
    free = run("q2", Q2_WRONG["checkpoints treated as free"][0], seed=3).tests[0]
    assert "returned 2" in free.message and "checkpoints are not free" in free.hint
    tie = run("q2", Q2_WRONG["pays at a tie"][0], seed=3).tests[2]
    assert "a one-step run never pays" in tie.hint
    none = run("q2", "def break_even_steps(w, q, h):\n    return None\n", seed=3)
    assert failing(none) == [RARE, FREQUENT, FREE, NO_CRASHES, BOUNDARY]   # None alone is no answer


Q2_RIGHT = {
    "closed form from 2": '''
def break_even_steps(w, q, h):
    if q == 0:
        return None
    r = 1 / (1 - q)                          # attempts of a step, resumed
    n = 2
    while w * (r * (r ** n - 1) / (r - 1) - n * r) <= n * h:
        n += 1
    return n
''',
    "its own sums, no q1": '''
def break_even_steps(w, q, h):
    if not q:
        return None
    p, n = 1 - q, 1
    while True:
        top = sum(w / p ** i for i in range(1, n + 1))
        if top - n * w / p > n * h:
            return n
        n += 1
''',
    "a numpy int": '''
import numpy as np


def break_even_steps(w, q, h):
    if q == 0:
        return None
    for n in np.arange(1, 10_000):
        top, resumed = expected_cost([(w, q)] * int(n))
        if top - resumed > n * h:
            return n
''',
}


@pytest.mark.parametrize("route", sorted(Q2_RIGHT))
def test_q2_a_right_answer_by_another_route_passes(route):
    passes("q2", Q2_RIGHT[route])


# q3 · reasons_for ------------------------------------------------------------------------------
Q3_SOLUTION = solution_cell("def reasons_for(")
RIGHT_LONG = ("work = sum(s['seconds'] for s in steps if not s['waits'])\n"
              "    long = work > long_seconds or sum(s['dollars'] for s in steps) > long_dollars\n")
RIGHT_IRREVERSIBLE = "irreversible = any(s['harm'] > 0 for s in steps)\n"
RIGHT_WAITS = "waits = any(s['waits'] for s in steps)\n"


def q3_source(long=RIGHT_LONG, irreversible=RIGHT_IRREVERSIBLE, waits=RIGHT_WAITS):
    return ("def reasons_for(steps, long_seconds=60.0, long_dollars=1.0):\n"
            f"    {long}    {irreversible}    {waits}"
            "    return {r for r, yes in (('long', long), ('irreversible', irreversible),\n"
            "                             ('waits', waits)) if yes}\n")


Q3_WRONG = {
    # the lesson's answer key, by name: the check's workloads have names of their own
    "a literal from the lesson": ('''
def reasons_for(steps, long_seconds=60.0, long_dollars=1.0):
    key = {"nightly research report": {"long"}, "refund": {"irreversible"},
           "access request": {"waits"}}
    return key.get(steps[0]["name"], set())
''', [NONE, LONG, IRREVERSIBLE, WAITS, SEVERAL, LINE]),
    # one reason ignored
    "waits ignored": (q3_source(waits="waits = False\n"), [WAITS, SEVERAL]),
    # a wait's hours counted as work
    "a wait's seconds are work": (q3_source(long=RIGHT_LONG.replace(" if not s['waits']", "")),
                                  [WAITS, SEVERAL]),
    # long by seconds only
    "dollars ignored": (q3_source(long=RIGHT_LONG.replace(
        " or sum(s['dollars'] for s in steps) > long_dollars", "")), [LONG, SEVERAL, LINE]),
    # long by the number of steps
    "many steps are long": (q3_source(long="long = len(steps) > 20 or "
                                           "sum(s['dollars'] for s in steps) > long_dollars\n"),
                            [NONE, LONG, SEVERAL, LINE]),
    # the lesson's 60 s and $1, whatever the check passes
    "a fixed line": (q3_source(long=RIGHT_LONG.replace("long_seconds", "60").replace(
        "long_dollars", "1")), [LINE]),
    # any step that has a harm field, or costs money, is an effect
    "every effect is irreversible": (q3_source(
        irreversible="irreversible = any(s['harm'] > 0 or s['dollars'] > 0 for s in steps)\n"),
        [NONE, LONG, WAITS, SEVERAL, LINE, ON_THE_LINE]),
    # >= where it must be >: a run that costs exactly the line is "long"
    "long at the line": (q3_source(long=RIGHT_LONG.replace(" > long_seconds", " >= long_seconds")
                                   .replace(" > long_dollars", " >= long_dollars")), [ON_THE_LINE]),
    # the first reason found, as if one were enough to name
    "the first reason only": ('''
def reasons_for(steps, long_seconds=60.0, long_dollars=1.0):
    if sum(s["seconds"] for s in steps if not s["waits"]) > long_seconds \\
            or sum(s["dollars"] for s in steps) > long_dollars:
        return {"long"}
    if any(s["harm"] > 0 for s in steps):
        return {"irreversible"}
    if any(s["waits"] for s in steps):
        return {"waits"}
    return set()
''', [SEVERAL]),
    # the library's answer
    "costs.reasons": ('''
def reasons_for(steps, long_seconds=60.0, long_dollars=1.0):
    workload = costs.Workload("mine", [costs.StepCost(**s) for s in steps])
    return costs.reasons(workload, long_seconds, long_dollars)
''', [NONE, LONG, IRREVERSIBLE, WAITS, SEVERAL, LINE, ON_THE_LINE]),
    # never a reason
    "always retry from the top": ("def reasons_for(steps, long_seconds=60.0, long_dollars=1.0):\n"
                                  "    return set()\n",
                                  [NONE, LONG, IRREVERSIBLE, WAITS, SEVERAL, LINE]),
}


def test_q3_the_solution_passes():
    passes("q3", Q3_SOLUTION, seeds=SEEDS + (44, 55))


@pytest.mark.parametrize("mistake", sorted(Q3_WRONG))
def test_q3_a_wrong_answer_fails_the_tests_that_name_its_mistake(mistake):
    source, expected = Q3_WRONG[mistake]
    fails("q3", source, expected)


def test_q3_feedback_shows_the_workload_and_points_at_the_reason():
    waits = run("q3", Q3_WRONG["a wait's seconds are work"][0], seed=3).tests[3]
    assert re.search(r"reasons_for\(steps, \d+, [\d.]+\) returned \{'long', 'waits'\} for a "
                     r"workload of \d+ steps", waits.message)
    assert re.search(r"'wait for [a-z]+ \d+': \d+ s, waits", waits.message)
    assert "a wait's seconds are not work" in waits.hint
    line = run("q3", Q3_WRONG["a fixed line"][0], seed=3).tests[5]
    assert "not the lesson's 60 s and $1" in line.hint
    many = run("q3", Q3_WRONG["many steps are long"][0], seed=3).tests[0]
    assert re.search(r"\d+ steps '[a-z ]+ \d+-1' … '[a-z ]+ \d+-\d+': [\d.]+ s each", many.message)
    assert "many steps are not long by themselves" in many.hint


Q3_RIGHT = {
    "a dict, like costs.reasons": '''
def reasons_for(steps, long_seconds=60.0, long_dollars=1.0):
    work = math.fsum(s["seconds"] for s in steps if not s["waits"])
    return {"long": work > long_seconds or math.fsum(s["dollars"] for s in steps) > long_dollars,
            "irreversible": any(s["harm"] for s in steps),
            "waits": any(s["waits"] for s in steps)}
''',
    "a list, built in one loop": '''
def reasons_for(steps, long_seconds=60.0, long_dollars=1.0):
    work = dollars = 0.0
    harm = waits = False
    for step in steps:
        if step["waits"]:
            waits = True
        else:
            work += step["seconds"]
        dollars += step["dollars"]
        harm = harm or step["harm"] > 0
    found = []
    if work > long_seconds or dollars > long_dollars:
        found.append("long")
    if harm:
        found.append("irreversible")
    if waits:
        found.append("waits")
    return found
''',
}


@pytest.mark.parametrize("route", sorted(Q3_RIGHT))
def test_q3_a_right_answer_by_another_route_passes(route):
    passes("q3", Q3_RIGHT[route])


# a whole notebook, graded as an instructor grades it ---------------------------------------------
def test_a_notebook_of_wrong_answers_fails_each_question_with_its_own_tests(tmp_path):
    path = learner(NAME, tmp_path, start="solutions", cells={
        "def expected_cost(": Q1_WRONG["products the wrong way"][0],
        "def break_even_steps(": Q2_WRONG["the rule of thumb"][0],
        "def reasons_for(": Q3_WRONG["waits ignored"][0]})
    score = grade_notebook(path, seed=13)
    assert statuses(score) == {"q1": "failed", "q2": "failed", "q3": "failed"}, score.report()
    assert failing_tests(score, "q1") == [FROM_THE_TOP]
    assert failing_tests(score, "q2") == [FREQUENT, BOUNDARY]
    assert failing_tests(score, "q3") == [WAITS, SEVERAL]
    assert score.passed == 3 + 3 + 5
