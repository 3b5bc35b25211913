"""Deterministic generator of GSM8K-style arithmetic word problems with step-by-step answers.

  Q: Sam has 12 apples. He buys 7 more and then gives 5 away. How many apples does Sam have?
  A: Sam starts with 12. 12 + 7 = 19. 19 - 5 = 14. The answer is 14.

1-3 operations (+, -, x, exact /) on small numbers: the calibration notes in DESIGN.md found a tiny
model learns single-digit operands far faster than larger ones. Every step is phrased at random in
one of several equivalent ways ("12 + 7 = 19." / "12 plus 7 is 19." / "Adding 7 gives 19.") so that
equally valid continuations differ in surface form, which is what makes draft/target acceptance
interesting for speculative decoding.

Splits are disjoint by construction: a question's split is fixed by a hash of its text (1% test,
1% validation, 98% train), and each split draws from its own seed and keeps only its own questions,
so no test question text ever appears in training.

CLI:
  taskgen.py sample [N]                      print N training problems
  taskgen.py write-test OUT.jsonl [N=1000]   write the test split as JSONL (question, answer, final)
  taskgen.py score PRED.jsonl                score JSONL rows with `final` and `output` fields
"""
import hashlib
import json
import random
import re
import sys

NAMES = [("Sam", "he"), ("Tom", "he"), ("Ben", "he"), ("Max", "he"), ("Leo", "he"), ("Jack", "he"),
         ("Tim", "he"), ("Dan", "he"), ("Joe", "he"), ("Bob", "he"), ("Lily", "she"), ("Mia", "she"),
         ("Anna", "she"), ("Emma", "she"), ("Lucy", "she"), ("Kate", "she"), ("Sue", "she"),
         ("Amy", "she"), ("Zoe", "she"), ("Eva", "she"), ("Ella", "she"), ("Rose", "she")]
ITEMS = ["apples", "cookies", "books", "cars", "balls", "toys", "flowers", "cats", "coins", "cups",
         "hats", "shells", "rocks", "pens", "eggs", "cakes", "birds", "boats", "stars", "sweets",
         "dolls", "boxes", "fish", "bells", "leaves", "stickers", "marbles", "blocks", "kites", "socks"]
CONTAINERS = ["bags", "boxes", "baskets", "rows", "plates", "jars", "piles"]

# Equivalent phrasings of one step; {a} is the running value, {b} the operand, {c} the result.
STEP_PHRASES = {
    "+": ["{a} + {b} = {c}.", "{a} plus {b} is {c}.", "Adding {b} gives {c}."],
    "-": ["{a} - {b} = {c}.", "{a} minus {b} is {c}.", "Taking away {b} leaves {c}."],
    "x": ["{a} x {b} = {c}.", "{a} times {b} is {c}.", "Multiplying by {b} gives {c}."],
    "/": ["{a} / {b} = {c}.", "{a} divided by {b} is {c}.", "Dividing by {b} gives {c}."],
}
START_PHRASES = ["{name} starts with {a}.", "{name} has {a} at first.", "At first there are {a}."]
# Story sentences for an operation on the running amount; {p} = pronoun, {b} = operand.
STORY = {
    "+": ["{P} buys {b} more.", "{P} finds {b} more.", "A friend gives {o} {b} more.",
          "{P} gets {b} more."],
    "-": ["{P} gives {b} away.", "{P} loses {b}.", "{P} gives {b} to a friend.", "{P} sells {b}."],
    "x": ["Then the number of {items} becomes {b} times as many.",
          "{P} gets {b} times as many {items}."],
}
MAX_VALUE = 50  # keeps every intermediate result to at most two digits


def _split_of(question):
    bucket = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) % 100
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def _make(rng):
    """One problem: (question, answer, final) drawn from rng."""
    name, pron = rng.choice(NAMES)
    P, o = pron.capitalize(), ("him" if pron == "he" else "her")
    items = rng.choice(ITEMS)
    n_ops = rng.choice([1, 2, 3])
    story, steps = [], []

    # First sentence: a plain amount, or containers x items each (the first operation is then x).
    if rng.random() < 0.25:
        k, each = rng.randint(2, 5), rng.randint(2, 9)
        value = k * each
        story.append(f"{name} has {k} {rng.choice(CONTAINERS)} with {each} {items} in each.")
        # "Multiplying by" needs a running value, which does not exist yet: only the explicit forms.
        steps.append(rng.choice(STEP_PHRASES["x"][:2]).format(a=k, b=each, c=value))
        n_ops -= 1
    else:
        value = rng.randint(2, 12)
        story.append(f"{name} has {value} {items}.")
        steps.append(rng.choice(START_PHRASES).format(name=name, a=value))

    question = f"How many {items} does {name} have now?"
    for i in range(n_ops):
        last = i == n_ops - 1
        choices = ["+", "-", "+", "-", "x"] + (["/"] if last else [])
        for _ in range(20):  # pick an operation whose result stays small, positive and exact
            op = rng.choice(choices)
            if op == "+":
                b = rng.randint(1, 9); c = value + b
            elif op == "-":
                b = rng.randint(1, 9); c = value - b
            elif op == "x":
                b = rng.randint(2, 4); c = value * b
            else:
                divisors = [d for d in range(2, 6) if value % d == 0 and value // d >= 1]
                if not divisors:
                    continue
                b = rng.choice(divisors); c = value // b
            if 0 < c <= MAX_VALUE:
                break
        else:
            op, b, c = "+", 1, value + 1
        if op == "/":
            # Division changes what is asked: sharing the total equally.
            story.append(f"{P} shares them equally among {b} friends.")
            question = f"How many {items} does each friend get?"
        else:
            story.append(rng.choice(STORY[op]).format(P=P, o=o, b=b, items=items))
        steps.append(rng.choice(STEP_PHRASES[op]).format(a=value, b=b, c=c))
        value = c

    q = "Q: " + " ".join(story) + " " + question + "\nA:"
    answer = " ".join(steps) + f" The answer is {value}."
    return q, answer, value


SPLIT_SEED = {"train": 1, "validation": 2, "test": 3}


def problems(split, seed=0, start=0):
    """Endless deterministic stream of (question, answer, final) for split; `seed` varies the
    stream (e.g. per training run), `start` skips that many raw draws (for resuming)."""
    rng = random.Random(f"{split}:{SPLIT_SEED[split]}:{seed}")
    for _ in range(start):
        _make(rng)
    while True:
        q, a, v = _make(rng)
        if _split_of(q) == split:
            yield q, a, v


def take(split, n, seed=0):
    out, gen = [], problems(split, seed)
    while len(out) < n:
        out.append(next(gen))
    return out


ANSWER_RE = re.compile(r"The answer is (-?\d+)")


def extract_answer(text):
    """The number after the first "The answer is", or None."""
    m = ANSWER_RE.search(text)
    return int(m.group(1)) if m else None


def is_correct(output_text, final):
    return extract_answer(output_text) == int(final)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else "sample"
    if cmd == "sample":
        for q, a, _ in take("train", int(argv[2]) if len(argv) > 2 else 5):
            print(q, a, "\n")
    elif cmd == "write-test":
        n = int(argv[3]) if len(argv) > 3 else 1000
        with open(argv[2], "w") as f:
            for q, a, v in take("test", n):
                f.write(json.dumps({"question": q, "answer": a, "final": v}) + "\n")
    elif cmd == "score":
        rows = [json.loads(l) for l in open(argv[2])]
        ok = sum(is_correct(r["output"], r["final"]) for r in rows)
        print(f"{ok}/{len(rows)} correct = {100.0 * ok / max(1, len(rows)):.1f}%")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
