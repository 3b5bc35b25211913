"""Testbed v2 task families (issue 7): seeded generators of problems with chain-of-thought solutions.

Three families, each mirroring one of the paper's domains and scored by its real benchmark's scorer
(scorers.py):

  word     GSM8K-like word problems: 2-5 operations, numbers up to 3 digits, 1-2 digit x 1 digit
           products, exact division; "... The answer is N."                        scorer gsm8k
  choice   MMLU-Pro-like multiple choice: options A-J with near-miss distractors (+-1, +-10, digit
           swaps, wrong operation); a short reasoning; "The answer is (X)."         scorer mmlu-pro
  trace    LiveCodeBench-like program tracing: a few lines of Python, a short trace, "Output: V"
                                                                                    scorer lcb-output

A problem is a question (the prompt, ending in "\\nA:" so that a model continues with the answer) and
a *renderer* that writes a gold solution in a style drawn from a Style object. Every step has at least
6 equivalent phrasings, optional connectives, restatements and units, free order of commutative
steps and several closing forms; all of them score identically (test_families.py checks this).
The content (numbers, names, the question text) comes from the problem's RNG; the style from a
separate RNG seeded by one draw of it, so re-rendering a problem in another style never changes it.

Splits are disjoint by construction: a question's split is fixed by a hash of its family and text
(1 % test, 1 % validation, 98 % train) and each split's stream keeps only its own questions.
"""
import hashlib
import random

FAMILIES = ("word", "choice", "trace")
SCORER = {"word": "gsm8k", "choice": "mmlu-pro", "trace": "lcb-output"}
MAX_VALUE = 999  # every number in a problem or a solution has at most 3 digits


class Style:
    """Chooses among equivalent surface forms: at random, or (force=i) always option i mod len, so a
    test can render every phrasing of every step. lean > 0 is a house style: with that probability a
    table's last phrasing, or an optional part written (a connective, unit, restatement, swapped operands),
    outright; else the uniform draw. A draft trained with it prefers other phrasings than a target trained
    uniformly, as real pairs trained on different corpora do; lean 0 draws nothing extra, so the uniform
    streams stay as they were."""

    def __init__(self, rng, force=None, lean=0.0):
        self.rng, self.force, self.lean = rng, force, lean

    def pick(self, options):
        if self.force is not None:
            return options[self.force % len(options)]
        if self.lean and self.rng.random() < self.lean:
            return options[-1]
        return self.rng.choice(options)

    def chance(self, p):
        if self.lean and self.rng.random() < self.lean:
            return True
        return self.rng.random() < p

    def shuffled(self, xs):
        xs = list(xs)
        if self.force is not None:
            return xs[::-1] if self.force % 2 else xs
        self.rng.shuffle(xs)
        return xs


def _cap(s):
    return s[:1].upper() + s[1:]


def _low(s):
    """Lower-case the first letter, for a phrase that follows a connective ("Then adding 5 ...")."""
    return s[:1].lower() + s[1:] if s[:1].isupper() and not s.startswith(("I ",)) else s


CONNECTIVES = ["Then ", "Next, ", "So ", "Now ", "After that, "]

# ---------------------------------------------------------------------------------------------
# Arithmetic steps, shared by word problems and multiple choice. {a} op {b} = {c}.
STEP_PHRASES = {
    "+": ["{a} + {b} = {c}.", "{a} plus {b} is {c}.", "{a} plus {b} equals {c}.", "Adding {b} gives {c}.",
          "{a} and {b} make {c}.", "{a} + {b} gives {c}.", "The sum of {a} and {b} is {c}."],
    "-": ["{a} - {b} = {c}.", "{a} minus {b} is {c}.", "{a} minus {b} equals {c}.", "Taking away {b} leaves {c}.",
          "{a} take away {b} is {c}.", "Removing {b} gives {c}.", "{a} - {b} leaves {c}."],
    "x": ["{a} x {b} = {c}.", "{a} times {b} is {c}.", "{a} times {b} equals {c}.", "Multiplying {a} by {b} gives {c}.",
          "{a} x {b} makes {c}.", "The product of {a} and {b} is {c}.", "{b} groups of {a} make {c}."],
    "/": ["{a} / {b} = {c}.", "{a} divided by {b} is {c}.", "{a} divided by {b} equals {c}.",
          "Dividing {a} by {b} gives {c}.", "{a} split into {b} equal parts is {c} each.", "{a} / {b} gives {c}."],
}
RESTATE = ["That is {c}.", "So that makes {c}.", "Now we have {c}.", "We have {c} now.", "The total is now {c}.",
           "That gives {c} in all."]


OP_WORD = {"+": "plus", "-": "minus", "x": "times", "/": "divided by"}


def _parts(n):
    """The nonzero place parts of n, largest first: 183 -> [100, 80, 3], 60 -> [60], 0 -> []."""
    s = str(n)
    return [int(d) * 10 ** (len(s) - 1 - i) for i, d in enumerate(s) if d != "0"]


def is_primitive(a, op, b):
    """A step that is one one-digit fact plus copying (with at most one carry/borrow chain): + with at
    most one column where both operands have a nonzero digit; - of a number with one nonzero digit (or a
    multiple of ten whose tens number is at most 9 below a's, as in long division);
    x of two numbers with one nonzero digit each; / whose quotient has one nonzero digit."""
    if op == "+":
        da, db = str(a)[::-1], str(b)[::-1]
        return sum(1 for i in range(min(len(da), len(db))) if da[i] != "0" and db[i] != "0") <= 1
    if op == "-":  # or a remainder in long division: 370 - 350 = 20 is 37 - 35 = 2 with the 0 copied
        return len(_parts(b)) <= 1 or (b % 10 == 0 and 0 <= a // 10 - b // 10 < 10)
    if op == "x":
        return len(_parts(a)) <= 1 and len(_parts(b)) <= 1
    return len(_parts(a // b)) <= 1


def decompose(a, op, b):
    """The sub-steps [(x, op, y, z), ...] of a non-primitive step a op b, each of them primitive, every
    sub-result explicit; None for a primitive step.
      +  split the smaller operand into its place parts, add them one by one to the larger:
         183 + 88 -> 183 + 80 = 263, 263 + 8 = 271
      -  split the subtrahend: 183 - 88 -> 183 - 80 = 103, 103 - 8 = 95
      x  split the operand with several nonzero digits (the other has one): 23 x 4 -> 20 x 4 = 80,
         3 x 4 = 12, 80 + 12 = 92
      /  long division by the quotient's place parts: 216 / 4 -> 4 x 50 = 200, 216 - 200 = 16,
         16 / 4 = 4, 50 + 4 = 54"""
    if is_primitive(a, op, b):
        return None
    subs = []
    if op in "+-":
        base, s = (a, b) if op == "-" or a >= b else (b, a)
        for p in _parts(s):
            subs.append((base, op, p, apply(op, base, p)))
            base = subs[-1][3]
        return subs
    if op == "x":
        m, d = (a, b) if len(_parts(a)) > 1 else (b, a)
        if len(_parts(d)) > 1:
            raise ValueError(f"{a} x {b}: both operands have several digits")
        prods = [(p, "x", d, p * d) for p in _parts(m)]
        subs += prods
        total = prods[0][3]
        for pr in prods[1:]:
            subs.append((total, "+", pr[3], total + pr[3]))
            total += pr[3]
        return subs
    q, rem = a // b, a
    qp = _parts(q)
    for p in qp[:-1]:
        subs.append((b, "x", p, b * p))
        subs.append((rem, "-", b * p, rem - b * p))
        rem -= b * p
    subs.append((rem, "/", b, qp[-1]))
    total = qp[0]
    for p in qp[1:]:
        subs.append((total, "+", p, total + p))
        total += p
    return subs


def _chain(a, op, b, sym):
    """The decomposition of a non-primitive +, - or x step as one chain of equal expressions, without
    the statement: 183 + 88 -> ["183 + 80 + 8", "263 + 8", "271"]; 23 x 4 -> ["20 x 4 + 3 x 4", "80 + 12",
    "92"]."""
    if op in "+-":
        base, s = (a, b) if op == "-" or a >= b else (b, a)
        terms = [base] + _parts(s)
        out = []
        while True:
            out.append(f" {sym[op]} ".join(map(str, terms)))
            if len(terms) == 1:
                return out
            terms = [apply(op, terms[0], terms[1])] + terms[2:]
    m, d = (a, b) if len(_parts(a)) > 1 else (b, a)
    ps = _parts(m)
    out = [" + ".join(f"{p} {sym['x']} {d}" for p in ps)]
    terms = [p * d for p in ps]
    while True:
        out.append(" + ".join(map(str, terms)))
        if len(terms) == 1:
            return out
        terms = [terms[0] + terms[1]] + terms[2:]


SYM_TEXT = {"+": "+", "-": "-", "x": "x", "/": "/"}
SYM_CODE = {"+": "+", "-": "-", "x": "*"}


def work(a, op, b):
    """For program traces: the text between "a op b = " and the result, "" for a primitive step:
    23 * 4 -> "20 * 4 + 3 * 4 = 80 + 12 = " (so "23 * 4 = 20 * 4 + 3 * 4 = 80 + 12 = 92")."""
    if is_primitive(a, op, b):
        return ""
    return " = ".join(_chain(a, op, b, SYM_CODE)[:-1]) + " = "


def _eq(x, op, y, z):
    return f"{x} {SYM_TEXT[op]} {y} = {z}"


def _join_and(es):
    return es[0] if len(es) == 1 else ", ".join(es[:-1]) + " and " + es[-1]


# Ways to write a decomposed step: E = the sub-equations, H = the statement ("88 + 183"), Hw = the
# statement in words ("88 plus 183"), c = the result. Index 4 is the chain form for +, - and x.
DECOMP_FRAMES = [
    lambda E, H, Hw, c, ch: f"{H}: {', '.join(E)}.",
    lambda E, H, Hw, c, ch: f"{Hw}: " + ", then ".join(E) + ".",
    lambda E, H, Hw, c, ch: f"First {E[0]}. " + " ".join(f"Then {e}." for e in E[1:]),
    lambda E, H, Hw, c, ch: f"{H} in steps: " + "; ".join(E) + ".",
    lambda E, H, Hw, c, ch: (f"{H} = " + " = ".join(ch) + ".") if ch else f"To find {H}: {', '.join(E)}.",
    lambda E, H, Hw, c, ch: ". ".join(E) + f". So {H} = {c}.",
    lambda E, H, Hw, c, ch: f"For {H}, " + _join_and(E) + ".",
]


def render_step(style, a, op, b, c, unit=None, connective=False):
    """One arithmetic step. A primitive step (is_primitive) in one of >= 6 phrasings; any other step as
    its mandatory decomposition into primitive sub-steps (decompose) in one of 7 frames. + and x may
    swap their operands in the statement; optional connective in front, optional unit after the result,
    optional restatement after."""
    subs = decompose(a, op, b)
    if op in "+x" and style.chance(0.3):
        a, b = b, a
    if subs is None:
        s = style.pick(STEP_PHRASES[op]).format(a=a, b=b, c=c)
    else:
        E = [_eq(*t) for t in subs]
        ch = _chain(a, op, b, SYM_TEXT) if op != "/" else None
        frame = style.pick(DECOMP_FRAMES)
        s = frame(E, _eq(a, op, b, c).rsplit(" = ", 1)[0], f"{a} {OP_WORD[op]} {b}", c, ch)
    if unit and s.endswith(f" {c}.") and style.chance(0.25):
        s = s[:-1] + f" {unit}."
    if connective and not s.startswith("First ") and style.chance(0.35):
        s = style.pick(CONNECTIVES) + _low(s)
    if style.chance(0.12):
        s += " " + style.pick(RESTATE).format(c=c)
    return s


def apply(op, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "x":
        return a * b
    return a // b


# ---------------------------------------------------------------------------------------------
# Word problems (GSM8K-like)
NAMES = [("Sam", "he"), ("Tom", "he"), ("Ben", "he"), ("Max", "he"), ("Leo", "he"), ("Jack", "he"),
         ("Tim", "he"), ("Dan", "he"), ("Joe", "he"), ("Bob", "he"), ("Lily", "she"), ("Mia", "she"),
         ("Anna", "she"), ("Emma", "she"), ("Lucy", "she"), ("Kate", "she"), ("Sue", "she"),
         ("Amy", "she"), ("Zoe", "she"), ("Eva", "she"), ("Ella", "she"), ("Rose", "she")]
ITEMS = ["apples", "cookies", "books", "cars", "balls", "toys", "flowers", "coins", "cups", "hats",
         "shells", "rocks", "pens", "eggs", "cakes", "boats", "stars", "sweets", "dolls", "bells",
         "leaves", "stickers", "marbles", "blocks", "kites", "socks", "beads", "cards", "nuts", "pins"]
CONTAINERS = ["bags", "boxes", "baskets", "rows", "plates", "jars", "piles", "packs"]
ADJ_PAIRS = [("red", "blue"), ("big", "small"), ("old", "new"), ("green", "yellow")]
STORY = {
    "+": ["{P} buys {b} more.", "{P} finds {b} more.", "A friend gives {o} {b} more.", "{P} gets {b} more.",
          "{P} wins {b} more."],
    "-": ["{P} gives {b} away.", "{P} loses {b}.", "{P} gives {b} to a friend.", "{P} sells {b}.",
          "{P} uses {b}."],
    "x": ["Then the number of {items} becomes {b} times as many.", "{P} ends up with {b} times as many {items}.",
          "The number of {items} grows to {b} times as many."],
}
START_PHRASES = ["{name} starts with {a}.", "{name} has {a} at first.", "At first there are {a}.",
                 "We start with {a}.", "{name} begins with {a} {items}.", "First, {name} has {a}."]
CLOSE_HAVE = ["The answer is {N}.", "The answer is {N} {items}.", "So {name} has {N} {items}. The answer is {N}.",
              "{name} ends with {N}. The answer is {N}.", "In the end there are {N}. The answer is {N}.",
              "The final count is {N}. The answer is {N}."]
CLOSE_EACH = ["The answer is {N}.", "The answer is {N} {items}.", "So each {who} gets {N}. The answer is {N}.",
              "Each {who} gets {N} {items}. The answer is {N}.", "That is {N} each. The answer is {N}.",
              "The share is {N}. The answer is {N}."]
QUESTION_HAVE = ["How many {items} does {name} have now?", "How many {items} does {name} have in the end?",
                 "How many {items} does {name} have?"]


def make_word(rng):
    """(question, render(style) -> answer, final)."""
    name, pron = rng.choice(NAMES)
    P, o = pron.capitalize(), ("him" if pron == "he" else "her")
    items = rng.choice(ITEMS)
    n_ops = rng.choices([2, 3, 4, 5], weights=[3, 3, 2, 1])[0]  # long 5-step solutions rarer (length)
    story = []
    # plan: a list of ("step", a, op, b, c) and ("any-order", [step, step]) entries, then the closing
    plan = []
    kinds = ["plain", "plain", "groups", "parts", "groups+plain"] + (["two-groups"] if n_ops >= 3 else [])
    kind = rng.choice(kinds)
    if kind == "plain":
        value = rng.randint(10, 200)
        story.append(f"{name} has {value} {items}.")
        plan.append(("start", value))
    elif kind in ("groups", "groups+plain"):
        k, each, cont = rng.randint(2, 9), rng.randint(11, 60), rng.choice(CONTAINERS)
        value = k * each
        extra = ""
        if kind == "groups+plain":
            m = rng.randint(5, 99)
            extra = f" and {m} more"
        story.append(f"{name} has {k} {cont} with {each} {items} in each{extra}.")
        plan.append(("step", k, "x", each, value))
        n_ops -= 1
        if kind == "groups+plain":
            plan.append(("step", value, "+", m, value + m))
            value += m
            n_ops -= 1
    elif kind == "parts":
        a, b = rng.randint(10, 200), rng.randint(10, 200)
        adj1, adj2 = rng.choice(ADJ_PAIRS)
        story.append(f"{name} has {a} {adj1} {items} and {b} {adj2} {items}.")
        value = a + b
        plan.append(("step", a, "+", b, value))
        n_ops -= 1
    else:  # two-groups: two independent products in free order, then their sum
        c1, c2 = rng.sample(CONTAINERS, 2)
        k1, e1, k2, e2 = rng.randint(2, 9), rng.randint(11, 40), rng.randint(2, 9), rng.randint(11, 40)
        p1, p2 = k1 * e1, k2 * e2
        story.append(f"{name} has {k1} {c1} with {e1} {items} each and {k2} {c2} with {e2} each.")
        plan.append(("any-order", [("step", k1, "x", e1, p1), ("step", k2, "x", e2, p2)]))
        value = p1 + p2
        plan.append(("step", p1, "+", p2, value))
        n_ops -= 3

    question = rng.choice(QUESTION_HAVE).format(items=items, name=name)
    each_who = None
    for i in range(max(0, n_ops)):
        last = i == n_ops - 1
        ops = ["+", "-", "+", "-"] + (["x"] if value <= 99 else []) + (["/"] if last else [])
        for _ in range(30):  # an operation whose result stays positive, exact and <= MAX_VALUE
            op = rng.choice(ops)
            if op == "+":
                b = rng.randint(2, 99)
            elif op == "-":
                b = rng.randint(2, 99)
            elif op == "x":
                b = rng.randint(2, 9)
            else:
                divisors = [d for d in range(2, 10) if value % d == 0 and 2 <= value // d <= 99]
                if not divisors:
                    continue
                b = rng.choice(divisors)
            c = apply(op, value, b)
            if 0 < c <= MAX_VALUE:
                break
        else:
            op, b, c = "+", 1, value + 1
        if op == "/":
            each_who = rng.choice(["friend", "child", "box"])
            if each_who == "box":
                story.append(f"{P} puts them into {b} boxes with the same number in each.")
                question = f"How many {items} are in each box?"
            else:
                plural = {"friend": "friends", "child": "children"}[each_who]
                story.append(f"{P} shares them equally among {b} {plural}.")
                question = f"How many {items} does each {each_who} get?"
        else:
            story.append(rng.choice(STORY[op]).format(P=P, o=o, b=b, items=items))
        plan.append(("step", value, op, b, c))
        value = c
    final = value
    q = "Q: " + " ".join(story) + " " + question + "\nA:"

    def render(style):
        out, first = [], True

        def step(s):
            nonlocal first
            _, a, op, b, c = s
            out.append(render_step(style, a, op, b, c, unit=items, connective=not first))
            first = False

        for entry in plan:
            if entry[0] == "start":
                if style.chance(0.75):  # optional: a solution may start right with the first operation
                    out.append(style.pick(START_PHRASES).format(name=name, a=entry[1], items=items))
            elif entry[0] == "any-order":
                for s in style.shuffled(entry[1]):
                    step(s)
            else:
                step(entry)
        close = CLOSE_EACH if each_who else CLOSE_HAVE
        out.append(style.pick(close).format(N=final, items=items, name=name, who=each_who))
        return " ".join(out)

    return q, render, final


# ---------------------------------------------------------------------------------------------
# Multiple choice (MMLU-Pro-like)
LETTERS = "ABCDEFGHIJ"
UNITS = [("minutes", "hours", "an hour", 60), ("seconds", "minutes", "a minute", 60),
         ("days", "weeks", "a week", 7), ("months", "years", "a year", 12), ("eggs", "dozen", "a dozen", 12),
         ("hours", "days", "a day", 24), ("legs", "spiders", "a spider", 8)]
# The mandatory option scan: all ten options in order, each written beside the value, then the highest
# digit place where they differ, or a match word. Why each part (tools/testbed/README.md has the runs):
# without a scan the letter was picked at chance, since finding "46" among near misses ("146", "64") is
# one hard lookup; with the verdict right after the option alone, the value sat far back; a scan that
# stopped at the match made "yes" always its last item, so models learned P(yes | letter) instead of
# comparing; a bare yes/no verdict was not learned either (a model that cannot compare says "no" ten
# times and is 90 % right): naming the differing place supervises the digit-by-digit comparison at every
# option (a draft-sized model trained on choice alone from tb-draft-v4: 27 % of validation problems after
# 7 M tokens with yes/no, 53 % after 6 M with these place verdicts).
# (intro, item, differs with {p} the place, match word, separator, end); {L} letter, {o} option value,
# {c} the value.
SCAN = [("Check the options: ", "{L}) {o} vs {c}: ", "{p}", "same", ", ", "."),
        ("", "{L}) {o}/{c} ", "{p} differ", "match", ". ", "."),
        ("Options: ", "{L}) {o} to {c}, ", "{p} off", "equal", "; ", "."),
        ("", "{L}) {o} with {c}: ", "{p}", "same", ", ", "."),
        ("Compare with {c}: ", "{L}) {o} vs {c} ", "{p}", "yes", ", ", "."),
        ("Looking for {c}: ", "{L}) {o}, {c}: ", "{p}", "found", ", ", "."),
        ("We scan: ", "{L} {o} {c} ", "{p}", "same", ", ", ".")]
PLACES = ["ones", "tens", "hundreds"]


def differing_place(o, v):
    """The highest digit place where o and v differ (numbers right-aligned), None when equal."""
    a, b = str(o).rjust(3, "0"), str(v).rjust(3, "0")
    return next((PLACES[2 - i] for i in range(3) if a[i] != b[i]), None)


MATCH = ["That is option ({L}).", "This matches ({L}).", "{c} is option {L}.", "Option ({L}) is {c}.",
         "So it is ({L}).", "{c} is listed as ({L})."]
CLOSE_CHOICE = ["The answer is ({L}).", "The answer is {L}.", "So the answer is ({L}).",
                "Therefore, the answer is ({L}).", "The correct answer is ({L}).", "Answer: {L}",
                "The answer is ({L}) {c}."]


def _distractors(rng, v, a, op, b):
    """9 distinct positive near-miss values != v: off by 1, 2, 10 or 100, last digits swapped, a
    wrong operation or an operand off by one."""
    near = [v + 1, v - 1, v + 2, v - 2, v + 10, v - 10, v + 100, v - 100]
    s = str(v)
    if len(s) >= 2 and s[-1] != s[-2]:
        near.append(int(s[:-2] + s[-1] + s[-2]))
    wrong = [a + b, a * b, abs(a - b), apply(op, a, b + 1) if op != "/" else v + 3,
             apply(op, a + 1, b) if op != "/" else v - 3, apply(op, a, max(1, b - 1)) if op != "/" else v * 2]
    cands, seen = [], {v}
    for group in (near, wrong):
        group = [x for x in group if 0 < x <= MAX_VALUE and x not in seen]
        rng.shuffle(group)
        for x in group:
            if x not in seen:
                seen.add(x)
                cands.append(x)
    near_pick = [x for x in cands if x in near][:6]
    rest = [x for x in cands if x not in near_pick]
    out = near_pick + rest[:9 - len(near_pick)]
    while len(out) < 9:
        x = v + rng.randint(-30, 30)
        if 0 < x <= MAX_VALUE and x not in seen:
            seen.add(x)
            out.append(x)
    return out


def make_choice(rng):
    kind = rng.choice(["mul", "mul", "add", "sub", "div", "unit", "price", "seq", "square"])
    fact = None
    if kind == "mul":
        a, b = rng.randint(12, 99), rng.randint(2, 9)
        stem, (x, op, y) = f"What is {a} x {b}?", (a, "x", b)
    elif kind == "add":
        a, b = rng.randint(100, 899), rng.randint(11, 99)
        stem, (x, op, y) = f"What is {a} + {b}?", (a, "+", b)
    elif kind == "sub":
        a, b = rng.randint(100, 999), rng.randint(11, 99)
        stem, (x, op, y) = f"What is {a} - {b}?", (a, "-", b)
    elif kind == "div":
        b, qv = rng.randint(2, 9), rng.randint(11, 99)
        stem, (x, op, y) = f"What is {b * qv} / {b}?", (b * qv, "/", b)
    elif kind == "unit":
        small, big, one, f = rng.choice(UNITS)
        n = rng.randint(2, 15 if len(_parts(f)) == 1 else 9)  # one factor keeps one nonzero digit
        stem, (x, op, y) = f"How many {small} are in {n} {big}?", (n, "x", f)
        fact = [f"There are {f} {small} in {one}.", f"{_cap(one)} has {f} {small}.",
                f"Each of the {big} has {f} {small}.", f"One of the {big} is {f} {small}.",
                f"We know {one} has {f} {small}.", f"{_cap(one)} is {f} {small}."]
    elif kind == "price":
        name, pron = rng.choice(NAMES)
        items = rng.choice(ITEMS)
        k, p = rng.randint(2, 9), rng.randint(11, 60)
        stem, (x, op, y) = (f"{name} buys {k} {items} at {p} dollars each. How many dollars does {pron} pay?",
                            (k, "x", p))
        fact = [f"{name} pays {p} dollars {k} times.", f"Each costs {p} dollars.", f"The cost is {k} x {p}.",
                f"We multiply the count by the price.", f"{k} {items} at {p} each.", f"Price times count."]
    elif kind == "seq":
        d, s0 = rng.randint(2, 15), rng.randint(1, 60)
        seq = [s0 + i * d for i in range(4)]
        stem = "What number comes next: " + ", ".join(map(str, seq)) + ", ?"
        x, op, y = seq[-1], "+", d
        fact = [f"The step is {d}.", f"Each number is {d} more.", f"The numbers go up by {d}.",
                f"From {seq[0]} to {seq[1]} is {d}.", f"The difference is {d}.", f"It adds {d} each time."]
    else:
        s = rng.randint(11, 99)
        stem, (x, op, y) = f"A square has sides of {s} cm. What is its perimeter in cm?", (s, "x", 4)
        fact = ["A square has 4 sides.", "The perimeter is 4 times the side.", "There are 4 equal sides.",
                "Perimeter = 4 x side.", "All 4 sides are equal.", "We add the 4 sides."]
    v = apply(op, x, y)
    options = _distractors(rng, v, x, op, y) + [v]
    rng.shuffle(options)
    L = LETTERS[options.index(v)]
    q = ("Q: " + stem + "\n" + "\n".join(f"{LETTERS[i]}) {o}" for i, o in enumerate(options)) + "\nA:")

    def render(style):
        out = []
        if fact and style.chance(0.7):
            out.append(style.pick(fact))
        out.append(render_step(style, x, op, y, v))
        intro, item, differs, matching, sep, end = style.pick(SCAN)
        scan = [item.format(L=LETTERS[i], o=o, c=v) + (differs.format(p=differing_place(o, v)) if o != v else matching)
                for i, o in enumerate(options)]
        out.append(intro.format(c=v) + sep.join(scan) + end)
        if style.chance(0.5):
            out.append(style.pick(MATCH).format(L=L, c=v))
        out.append(style.pick(CLOSE_CHOICE).format(L=L, c=v))
        return " ".join(out)

    return q, render, L


# ---------------------------------------------------------------------------------------------
# Program tracing (LiveCodeBench-like)
VARS = ["a", "b", "c", "x", "y", "n", "s", "t", "k", "m"]
SET_CONST = ["{v} = {n}.", "{v} is {n}.", "{v} starts at {n}.", "Set {v} to {n}.", "{v} gets {n}.", "{v} holds {n}."]
# {w} is the mandatory decomposition of a non-primitive step (work()), "" for a primitive one
SET_EXPR = ["{v} = {x} {op} {y} = {w}{c}.", "{v} = {e} = {x} {op} {y} = {w}{c}.", "{v} is {x} {op} {y}, which is {w}{c}.",
            "{x} {op} {y} = {w}{c}, so {v} = {c}.", "{v} becomes {x} {op} {y} = {w}{c}.",
            "Since {x} {op} {y} = {w}{c}, {v} = {c}.", "Now {v} = {x} {op} {y} = {w}{c}."]
EVAL_EXPR = ["{e} = {x} {op} {y} = {w}{c}.", "{x} {op} {y} = {w}{c}.", "{e} is {x} {op} {y} = {w}{c}.",
             "That is {x} {op} {y}, or {w}{c}.", "{e} gives {x} {op} {y} = {w}{c}.", "We print {x} {op} {y} = {w}{c}."]
COND_TRUE = ["{x} {cmp} {k} is true.", "Since {x} {cmp} {k}, the if branch runs.", "{x} {cmp} {k} holds.",
             "The test {x} {cmp} {k} is True.", "Is {x} {cmp} {k}? Yes.", "{x} {cmp} {k}, so we take the if branch."]
COND_FALSE = ["{x} {cmp} {k} is false.", "Since {x} {cmp} {k} fails, we skip the if.", "{x} {cmp} {k} does not hold.",
              "The test {x} {cmp} {k} is False.", "Is {x} {cmp} {k}? No.", "{x} {cmp} {k} is not true."]
LOOP_INTRO = ["The loop runs {n} times.", "i goes from 0 to {m}.", "range({n}) gives i = 0 to {m}.",
              "There are {n} steps.", "The loop has {n} rounds.", "We loop {n} times."]
LOOP_STEP = ["i = {i}: {v} = {x} {op} {y} = {w}{c}.", "With i = {i}, {v} = {x} {op} {y} = {w}{c}.",
             "i is {i}, so {v} becomes {x} {op} {y} = {w}{c}.", "When i = {i}, {v} = {x} {op} {y} = {w}{c}.",
             "Step i = {i}: {x} {op} {y} = {w}{c}.", "i = {i} gives {v} = {x} {op} {y} = {w}{c}."]
CLOSE_TRACE = ["Output: {out}", "It prints {out}.\nOutput: {out}", "The program prints {out}.\nOutput: {out}",
               "So it prints {out}.\nOutput: {out}", "So the output is {out}.\nOutput: {out}",
               "The result is {out}.\nOutput: {out}"]
# Looking a variable's value up before using it (a mandatory step: a small model binds names poorly)
LOOKUP = ["{u} is {x}.", "{u} = {x}.", "Here {u} is {x}.", "We have {u} = {x}.", "{u} holds {x}.", "Recall {u} = {x}."]
# Comparing two numbers digit by place, tens first (a mandatory step before an if's verdict or a min/max pick)
COMPARE = ["{a} vs {b}: {places}.", "Compare {a} and {b}: {places}.", "{a} and {b}: {places}.",
           "Checking {a} against {b}: {places}.", "For {a} and {b}: {places}.", "{a} against {b}: {places}."]
CODE_OP = {"+": "+", "-": "-", "x": "*"}
CMP = {">": lambda a, b: a > b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b}


def _binop(rng, x, small_only=False):
    """An operation and operand for value x whose result stays in 0..MAX_VALUE (x only on small values)."""
    ops = ["+", "-"] + (["x"] if x <= 40 and not small_only else [])
    for _ in range(20):
        op = rng.choice(ops)
        y = rng.randint(2, 9) if op == "x" else rng.randint(1, 30)
        c = apply(op, x, y)
        if 0 <= c <= MAX_VALUE:
            return op, y, c
    return "+", 1, x + 1


def compare_places(a, b):
    """The place-by-place comparison of a and b (< 100), tens first, stopping at the first place that
    differs: 41, 40 -> "tens 4 = 4, ones 1 > 0"."""
    parts = []
    for place, da, db in (("tens", a // 10, b // 10), ("ones", a % 10, b % 10)):
        rel = ">" if da > db else "<" if da < db else "="
        parts.append(f"{place} {da} {rel} {db}")
        if rel != "=":
            break
    return ", ".join(parts)


def compare_step(style, a, b):
    return style.pick(COMPARE).format(a=a, b=b, places=compare_places(a, b))


def lookup_step(style, env, names):
    """The values of the variables an expression reads, looked up before it is evaluated."""
    return " ".join(style.pick(LOOKUP).format(u=u, x=env[u]) for u in names)


def make_trace(rng):
    kind = rng.choice(["linear", "branch", "loop", "func", "list"])
    names = rng.sample(VARS, 4)
    code, steps = [], []  # steps: callables style -> sentence
    if kind == "linear":
        env = {}
        v0, n0 = names[0], rng.randint(2, 30)
        code.append(f"{v0} = {n0}")
        env[v0] = n0
        steps.append(lambda st, v0=v0, n0=n0: st.pick(SET_CONST).format(v=v0, n=n0))
        for v in names[1:rng.randint(2, 3) + 1]:
            u = rng.choice(sorted(env))
            op, y, c = _binop(rng, env[u])
            use_var = [w for w in env if w != u]
            if use_var and rng.random() < 0.4 and op != "x":
                w = rng.choice(sorted(use_var))
                y = env[w]
                c = apply(op, env[u], y)
                if c < 0 or c > MAX_VALUE:
                    op, c = "+", env[u] + y
                e, reads = f"{u} {CODE_OP[op]} {w}", [u, w]
            else:
                e, reads = f"{u} {CODE_OP[op]} {y}", [u]
            code.append(f"{v} = {e}")
            steps.append(lambda st, v=v, x=env[u], op=op, y=y, c=c, e=e, env=dict(env), reads=reads:
                         lookup_step(st, env, reads) + " " +
                         st.pick(SET_EXPR).format(v=v, x=x, op=CODE_OP[op], y=y, c=c, e=e, w=work(x, op, y)))
            env[v] = c
        last = names[:len(env)][-1]
        if rng.random() < 0.5:
            code.append(f"print({last})")
            out = env[last]
        else:
            u, w = rng.sample(sorted(env), 2)
            op = rng.choice(["+", "-"]) if env[u] >= env[w] else "+"
            out = apply(op, env[u], env[w])
            e = f"{u} {CODE_OP[op]} {w}"
            code.append(f"print({e})")
            steps.append(lambda st, x=env[u], op=op, y=env[w], c=out, e=e, env=dict(env), reads=[u, w]:
                         lookup_step(st, env, reads) + " " +
                         st.pick(EVAL_EXPR).format(x=x, op=CODE_OP[op], y=y, c=c, e=e, w=work(x, op, y)))
    elif kind == "branch":
        v = names[0]
        x = rng.randint(2, 60)
        k = max(1, min(99, x + rng.choice([-7, -3, -1, 0, 1, 3, 7])))
        cmp = rng.choice(list(CMP))
        taken = CMP[cmp](x, k)
        op1, y1, c1 = _binop(rng, x)
        op2, y2, c2 = _binop(rng, x)
        has_else = rng.random() < 0.6
        code += [f"{v} = {x}", f"if {v} {cmp} {k}:", f"  {v} = {v} {CODE_OP[op1]} {y1}"]
        if has_else:
            code += ["else:", f"  {v} = {v} {CODE_OP[op2]} {y2}"]
        code.append(f"print({v})")
        steps.append(lambda st: st.pick(SET_CONST).format(v=v, n=x))
        steps.append(lambda st: compare_step(st, x, k) + " " +
                     st.pick(COND_TRUE if taken else COND_FALSE).format(x=x, cmp=cmp, k=k))
        if taken:
            out = c1
            steps.append(lambda st: st.pick(SET_EXPR).format(v=v, x=x, op=CODE_OP[op1], y=y1, c=c1,
                                                            e=f"{v} {CODE_OP[op1]} {y1}", w=work(x, op1, y1)))
        elif has_else:
            out = c2
            steps.append(lambda st: st.pick(SET_EXPR).format(v=v, x=x, op=CODE_OP[op2], y=y2, c=c2,
                                                            e=f"{v} {CODE_OP[op2]} {y2}", w=work(x, op2, y2)))
        else:
            out = x
            steps.append(lambda st: st.pick([f"{v} stays {x}.", f"{v} is still {x}.", f"So {v} = {x}.",
                                             f"Nothing changes: {v} = {x}.", f"{v} keeps {x}.",
                                             f"{v} remains {x}."]))
    elif kind == "loop":
        v = names[0]
        s0, n = rng.randint(0, 20), rng.randint(2, 4)
        form = rng.choice(["i", "k", "2"])
        if form == "i":
            body, y_of = f"{v} = {v} + i", (lambda i: i)
        elif form == "k":
            kk = rng.randint(2, 15)
            body, y_of = f"{v} = {v} + {kk}", (lambda i, kk=kk: kk)
        else:
            s0, n = rng.randint(1, 12), rng.randint(2, 3)
            body, y_of = f"{v} = {v} * 2", (lambda i: 2)
        op = "x" if form == "2" else "+"
        code += [f"{v} = {s0}", f"for i in range({n}):", f"  {body}", f"print({v})"]
        steps.append(lambda st: st.pick(SET_CONST).format(v=v, n=s0))
        steps.append(lambda st: st.pick(LOOP_INTRO).format(n=n, m=n - 1) if st.chance(0.5) else "")
        s = s0
        for i in range(n):
            c = apply(op, s, y_of(i))
            steps.append(lambda st, i=i, x=s, y=y_of(i), c=c:
                         st.pick(LOOP_STEP).format(i=i, v=v, x=x, op=CODE_OP[op], y=y, c=c, w=work(x, op, y)))
            s = c
        out = s
    elif kind == "func":
        p = names[0]
        k1, k2 = rng.randint(2, 9), rng.randint(1, 30)
        op2 = rng.choice(["+", "-"])
        arg = rng.randint(2, 40)
        r1 = arg * k1
        if op2 == "-" and r1 - k2 < 0:
            op2 = "+"
        r2 = apply(op2, r1, k2)
        code += [f"def f({p}):", f"  return {p} * {k1} {op2} {k2}", f"print(f({arg}))"]
        steps.append(lambda st: st.pick([f"f({arg}) has {p} = {arg}.", f"We call f with {p} = {arg}.",
                                         f"In f, {p} is {arg}.", f"f({arg}): {p} = {arg}.",
                                         f"The call sets {p} to {arg}.", f"{p} = {arg} inside f."]))
        steps.append(lambda st: st.pick(EVAL_EXPR).format(e=f"{p} * {k1}", x=arg, op="*", y=k1, c=r1,
                                                          w=work(arg, "x", k1)))
        steps.append(lambda st: st.pick(EVAL_EXPR).format(e=f"{arg} * {k1} {op2} {k2}", x=r1, op=op2, y=k2, c=r2,
                                                          w=work(r1, op2, k2)))
        out = r2
    else:  # list
        v = rng.choice(["xs", "nums", "vals"])
        xs = [rng.randint(1, 50) for _ in range(rng.randint(3, 4))]
        what = rng.choice(["sum", "max", "min", "index"])
        code.append(f"{v} = [{', '.join(map(str, xs))}]")
        if what == "sum":
            code.append(f"print(sum({v}))")
            out, run = sum(xs), xs[0]
            for x in xs[1:]:
                steps.append(lambda st, a=run, b=x, c=run + x: render_step(st, a, "+", b, c))
                run += x
        elif what in ("max", "min"):
            code.append(f"print({what}({v}))")
            out = max(xs) if what == "max" else min(xs)
            word = "largest" if what == "max" else "smallest"
            best = xs[0]
            for x in xs[1:]:  # the scan keeps the best so far, comparing it with each next item by place
                better = x > best if what == "max" else x < best
                steps.append(lambda st, x=x, best=best, new=x if better else best:
                             compare_step(st, x, best) + " " + st.pick(
                                 [f"So far {new}.", f"Keep {new}.", f"Now {new}.", f"The {word} so far is {new}.",
                                  f"{new} stays ahead." if new == best else f"{new} takes over.", f"Best: {new}."]))
                best = x if better else best
            steps.append(lambda st: st.pick([f"The {word} is {out}.", f"{what}({v}) = {out}.",
                                             f"The {word} number is {out}.", f"{what} gives {out}.",
                                             f"Of these, {out} is the {word}.", f"{what}({v}) is {out}."]))
        else:
            i = rng.randrange(len(xs))
            code.append(f"print({v}[{i}])")
            out = xs[i]
            nth = ["first", "second", "third", "fourth"][i]
            steps.append(lambda st: st.pick([f"{v}[{i}] is {out}.", f"Index {i} is the {nth} item, {out}.",
                                             f"The {nth} item is {out}.", f"{v}[{i}] = {out}.",
                                             f"Counting from 0, {v}[{i}] = {out}.", f"At index {i} we find {out}."]))
    q = "Q: What does this program print?\n" + "\n".join(code) + "\nA:"

    def render(style):
        out_s = [s(style) for s in steps]
        out_s = [s for s in out_s if s]
        out_s.append(style.pick(CLOSE_TRACE).format(out=out))
        return " ".join(out_s)

    return q, render, str(out)


MAKERS = {"word": make_word, "choice": make_choice, "trace": make_trace}


# ---------------------------------------------------------------------------------------------
# Splits and streams
def split_of(family, question):
    bucket = int(hashlib.sha256(f"{family}\n{question}".encode()).hexdigest()[:8], 16) % 100
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


SPLIT_SEED = {"train": 1, "validation": 2, "test": 3}


def make(family, rng, force=None, lean=0.0):
    """One problem row of `family` from rng: question, answer (a gold solution in a random style, or
    in forced style `force`, or leaning to each table's last phrasing, see Style), final, family, scorer."""
    q, render, final = MAKERS[family](rng)
    style = Style(random.Random(rng.random()), force, lean)
    return {"question": q, "answer": render(style), "final": final, "family": family, "scorer": SCORER[family]}


def make_with_renderer(family, rng):
    """(row without answer, render(style)) for re-rendering one problem in many styles (tests)."""
    q, render, final = MAKERS[family](rng)
    return {"question": q, "final": final, "family": family, "scorer": SCORER[family]}, render


def problems(split, seed=0, families=FAMILIES, weights=None, lean=0.0):
    """Endless deterministic stream of problem rows of `split`: each draw picks a family (weights,
    default uniform) and keeps the problem only if its question hashes into `split`; answers in the
    house style `lean` (Style)."""
    rng = random.Random(f"testbed:{split}:{SPLIT_SEED[split]}:{seed}")
    families = list(families)
    while True:
        fam = rng.choices(families, weights=weights)[0] if len(families) > 1 else families[0]
        row = make(fam, rng, lean=lean)
        if split_of(fam, row["question"]) == split:
            yield row


def take(split, n, seed=0, families=FAMILIES):
    """The first n distinct questions of each family in `families` (n per family), family by family."""
    out = []
    for fam in families:
        gen, seen = problems(split, seed, families=[fam]), set()
        while len(seen) < n:
            row = next(gen)
            if row["question"] not in seen:
                seen.add(row["question"])
                out.append(row)
    return out
