"""Tests of the testbed v2 generator and scorers (no torch needed).

  cd tools/testbed && /usr/bin/python3 -m unittest -v test_families
"""
import contextlib
import io
import json
import os
import random
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import families  # noqa: E402
import scorers  # noqa: E402
from families import FAMILIES, Style  # noqa: E402

N = 150  # problems per family and check: keeps the whole file well under a minute


def run_program(code):
    """Execute a trace problem's program and return what it prints, stripped."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {})
    return buf.getvalue().strip()


def program_of(question):
    return question.split("\n", 1)[1].rsplit("\nA:", 1)[0]


class Determinism(unittest.TestCase):
    def test_same_seed_same_problems(self):
        for split in ("train", "validation", "test"):
            self.assertEqual(families.take(split, 20), families.take(split, 20))
        a = families.problems("train", seed=7)
        b = families.problems("train", seed=7)
        self.assertEqual([next(a) for _ in range(50)], [next(b) for _ in range(50)])

    def test_other_seed_other_problems(self):
        a = families.problems("train", seed=1)
        b = families.problems("train", seed=2)
        self.assertNotEqual([next(a)["question"] for _ in range(20)], [next(b)["question"] for _ in range(20)])

    def test_rendering_does_not_change_the_problem(self):
        # The style has its own RNG: forcing a style leaves the question and the stream unchanged.
        for fam in FAMILIES:
            r1, r2 = random.Random(3), random.Random(3)
            rows1 = [families.make(fam, r1) for _ in range(10)]
            rows2 = [families.make(fam, r2, force=4) for _ in range(10)]
            self.assertEqual([r["question"] for r in rows1], [r["question"] for r in rows2])


class Splits(unittest.TestCase):
    def test_streams_keep_their_split(self):
        for split in ("train", "validation", "test"):
            gen = families.problems(split, seed=0)
            for _ in range(100):
                row = next(gen)
                self.assertEqual(families.split_of(row["family"], row["question"]), split)

    def test_splits_disjoint(self):
        qs = {}
        for split, n in (("train", 2000), ("validation", 100), ("test", 100)):
            gen = families.problems(split, seed=0)
            qs[split] = {(r["family"], r["question"]) for r in (next(gen) for _ in range(n))}
        self.assertFalse(qs["train"] & qs["test"])
        self.assertFalse(qs["train"] & qs["validation"])
        self.assertFalse(qs["validation"] & qs["test"])

    def test_committed_test_files_are_test_split(self):
        for fam in FAMILIES:
            path = os.path.join(REPO, "data", f"testbed_{fam}_test.jsonl")
            if not os.path.exists(path):
                self.skipTest(f"{path} not written")
            with open(path) as f:
                rows = [json.loads(line) for line in f]
            self.assertGreaterEqual(len(rows), 100)
            self.assertEqual(len({r["question"] for r in rows}), len(rows), "duplicate questions")
            for r in rows:
                self.assertEqual(r["family"], fam)
                self.assertEqual(r["scorer"], families.SCORER[fam])
                self.assertEqual(families.split_of(fam, r["question"]), "test")
                self.assertTrue(scorers.is_correct(r["scorer"], r["answer"], r["final"]))
            # the file is what the generator writes today (regenerate with taskgen.py write-test)
            self.assertEqual(rows, families.take("test", len(rows), families=[fam]))


class GoldSolutions(unittest.TestCase):
    def test_every_gold_solution_scores_correct(self):
        for fam in FAMILIES:
            for split in ("train", "test"):
                gen = families.problems(split, seed=11, families=[fam])
                for _ in range(N):
                    r = next(gen)
                    self.assertTrue(r["question"].endswith("\nA:"), r["question"])
                    self.assertTrue(scorers.is_correct(r["scorer"], r["answer"], r["final"]),
                                    f"{fam}: {r['question']} {r['answer']} final {r['final']}")

    def test_trace_programs_print_the_gold_output(self):
        gen = families.problems("train", seed=5, families=["trace"])
        for _ in range(N):
            r = next(gen)
            self.assertEqual(run_program(program_of(r["question"])), r["final"], r["question"])

    def test_word_and_choice_finals(self):
        gen = families.problems("train", seed=5, families=["word", "choice"])
        for _ in range(N):
            r = next(gen)
            if r["family"] == "word":
                self.assertIsInstance(r["final"], int)
                self.assertTrue(0 < r["final"] <= families.MAX_VALUE)
            else:
                # exactly one option holds the value the gold solution computes, and it is `final`
                opts = [line for line in r["question"].split("\n") if line[1:3] == ") "]
                self.assertEqual([o[0] for o in opts], list("ABCDEFGHIJ"))
                values = [o[3:] for o in opts]
                self.assertEqual(len(set(values)), 10, r["question"])


class OptionScan(unittest.TestCase):
    def test_differing_place(self):
        cases = {(46, 146): "hundreds", (45, 54): "tens", (9, 10): "tens", (271, 272): "ones", (7, 7): None,
                 (999, 99): "hundreds", (310, 301): "tens"}
        for (o, v), place in cases.items():
            self.assertEqual(families.differing_place(o, v), place, (o, v))

    def test_every_option_gets_its_verdict(self):
        # in every scan phrasing: the value's option gets the match word, every other its differing place
        rng = random.Random(5)
        for _ in range(30):
            row, render = families.make_with_renderer("choice", rng)
            options = {line[0]: int(line[3:]) for line in row["question"].split("\n") if line[1:3] == ") "}
            v = options[row["final"]]
            for force, (_, item, differs, matching, _, _) in enumerate(families.SCAN):
                answer = render(Style(random.Random(force), force))
                for letter, o in options.items():
                    verdict = matching if o == v else differs.format(p=families.differing_place(o, v))
                    self.assertIn(item.format(L=letter, o=o, c=v) + verdict, answer)


class TraceSteps(unittest.TestCase):
    """The mandatory steps of program traces: place comparisons before an if's verdict or a min/max pick,
    and each variable's value looked up before an expression reads it."""

    def test_compare_places(self):
        cases = {(41, 40): "tens 4 = 4, ones 1 > 0", (9, 2): "tens 0 = 0, ones 9 > 2",
                 (51, 51): "tens 5 = 5, ones 1 = 1", (42, 35): "tens 4 > 3", (7, 30): "tens 0 < 3"}
        for (a, b), places in cases.items():
            self.assertEqual(families.compare_places(a, b), places, (a, b))

    def test_every_comparison_and_lookup_is_right(self):
        compare = re.compile(r"(\d+)(?: vs | and | against )(\d+): ((?:tens|ones) \d [<>=] \d(?:, ones \d [<>=] \d)?)")
        lookup = re.compile(r"(?:^|\. )(?:Here |We have |Recall )?([a-z]) (?:is|=|holds) (\d+)\.")
        n_compare = n_lookup = 0
        gen = families.problems("train", seed=17, families=["trace"])
        for _ in range(4 * N):
            r = next(gen)
            code = r["question"].split("\n", 1)[1].rsplit("\nA:", 1)[0]
            for m in compare.finditer(r["answer"]):
                a, b = int(m.group(1)), int(m.group(2))
                self.assertEqual(m.group(3), families.compare_places(a, b), r["answer"])
                n_compare += 1
            if any(w in code for w in ("if ", "for ", "def ", "[")):
                continue
            # straight-line programs assign each variable once: every lookup names its final value
            env = {}
            exec("\n".join(line for line in code.split("\n") if not line.startswith("print")), env)
            for m in lookup.finditer(r["answer"]):
                self.assertEqual(env[m.group(1)], int(m.group(2)), (m.group(0), r["answer"]))
                n_lookup += 1
        self.assertGreater(n_compare, 100)
        self.assertGreater(n_lookup, 100)


class Phrasings(unittest.TestCase):
    TABLES = ["START_PHRASES", "CLOSE_HAVE", "CLOSE_EACH", "RESTATE", "SCAN", "MATCH", "CLOSE_CHOICE", "SET_CONST",
              "SET_EXPR", "EVAL_EXPR", "COND_TRUE", "COND_FALSE", "LOOP_INTRO", "LOOP_STEP", "CLOSE_TRACE"]

    def test_tables_have_six_phrasings(self):
        for op, table in families.STEP_PHRASES.items():
            self.assertGreaterEqual(len(set(table)), 6, op)
        for name in self.TABLES:
            self.assertGreaterEqual(len(set(getattr(families, name))), 6, name)

    def test_every_phrasing_scores_identically(self):
        for fam in FAMILIES:
            rng = random.Random(fam)
            for _ in range(40):
                row, render = families.make_with_renderer(fam, rng)
                answers = set()
                for force in range(8):  # forced style i: phrasing i of every step (tables have 6-8)
                    answers.add(render(Style(random.Random(force), force)))
                for seed in range(12):  # plus random styles: connectives, units, restatements, order
                    answers.add(render(Style(random.Random(seed))))
                self.assertGreaterEqual(len(answers), 6, f"{fam}: {row['question']}")
                extracted = {scorers.extract(row["scorer"], a) for a in answers}
                self.assertEqual(len(extracted), 1, answers)
                for a in answers:
                    self.assertTrue(scorers.is_correct(row["scorer"], a, row["final"]), a)

    def test_commutative_steps_in_both_orders(self):
        # "two-groups" word problems compute two products in either order
        rng, orders = random.Random(0), set()
        while len(orders) < 2:
            row, render = families.make_with_renderer("word", rng)
            if " each and " not in row["question"]:
                continue
            orders.add(render(Style(random.Random(0), 0))[:12])
            orders.add(render(Style(random.Random(0), 1))[:12])
        self.assertEqual(len(orders), 2)


class HouseStyle(unittest.TestCase):
    """Style(lean=P), the draft's house style (train.py --style-lean)."""

    def test_lean_zero_is_the_uniform_stream(self):
        a = families.problems("train", seed=9)
        b = families.problems("train", seed=9, lean=0.0)
        self.assertEqual([next(a) for _ in range(40)], [next(b) for _ in range(40)])

    def test_lean_prefers_the_last_phrasing(self):
        table = families.STEP_PHRASES["+"]
        for lean, lo, hi in ((0.0, 0.10, 0.19), (0.3, 0.33, 0.46), (1.0, 1.0, 1.0)):
            style = Style(random.Random(1), lean=lean)
            share = sum(style.pick(table) == table[-1] for _ in range(2000)) / 2000
            expected = lean + (1 - lean) / len(table)
            self.assertTrue(lo <= share <= hi, f"lean {lean}: last phrasing {share:.3f}, expected {expected:.3f}")

    def test_lean_writes_optional_parts(self):
        for lean, lo, hi in ((0.0, 0.07, 0.13), (0.4, 0.42, 0.52)):
            style = Style(random.Random(2), lean=lean)
            share = sum(style.chance(0.1) for _ in range(2000)) / 2000
            self.assertTrue(lo <= share <= hi, f"lean {lean}: optional part written {share:.3f}")

    def test_house_style_keeps_problems_and_scores(self):
        for fam in FAMILIES:
            uniform = families.problems("train", seed=4, families=[fam])
            leaning = families.problems("train", seed=4, families=[fam], lean=0.5)
            differ = 0
            for _ in range(N // 3):
                u, r = next(uniform), next(leaning)
                self.assertEqual(u["question"], r["question"])
                self.assertTrue(scorers.is_correct(r["scorer"], r["answer"], r["final"]), r["answer"])
                differ += u["answer"] != r["answer"]
            self.assertGreater(differ, N // 6, fam)


EXPR = r"\d+(?: [-+x*/] \d+)*"
CHAIN = re.compile(r"(?<![\w\[\]])(?<![-+*/x] )" + EXPR + r"(?: = " + EXPR + r")+")


def value(expr):
    return eval(expr.replace("x", "*"), {})  # digits and + - * / only (the regex guarantees it)


def binary(expr):
    """(a, op, b) of a two-operand expression, else None."""
    t = expr.split(" ")
    return (int(t[0]), t[1], int(t[2])) if len(t) == 3 else None


class Arithmetic(unittest.TestCase):
    """Every equation in every gold solution is right, and every step that is not a one-digit fact
    plus copying is written out as its decomposition (families.decompose) before its result."""

    def chains(self, answer):
        return [m.group(0).split(" = ") for m in CHAIN.finditer(answer)]

    def test_every_equation_in_gold_solutions_is_right(self):
        n_eq = 0
        for fam in FAMILIES:
            gen = families.problems("train", seed=13, families=[fam])
            for _ in range(4 * N):
                r = next(gen)
                for ch in self.chains(r["answer"]):
                    vals = [value(e) for e in ch]
                    self.assertEqual(len(set(vals)), 1, (ch, r["answer"]))
                    n_eq += len(ch) - 1
        self.assertGreater(n_eq, 3000)

    def test_non_primitive_steps_come_after_their_work(self):
        # a two-operand expression that is not primitive is only allowed where its value was already
        # produced by a primitive equation, or where the rest of its chain works it out
        n_decomposed = 0
        for fam in FAMILIES:
            gen = families.problems("train", seed=17, families=[fam])
            for _ in range(4 * N):
                r = next(gen)
                produced = set()
                for ch in self.chains(r["answer"]):
                    for i, e in enumerate(ch[:-1]):
                        bo = binary(e)
                        op = bo and bo[1].replace("*", "x")
                        if bo and not families.is_primitive(bo[0], op, bo[2]):
                            ok = value(e) in produced or len(ch) - i > 2  # worked out later in its chain
                            self.assertTrue(ok, (e, r["answer"]))
                            n_decomposed += 1
                        elif bo:
                            produced.add(value(ch[-1]))
        self.assertGreater(n_decomposed, 200)

    def test_decompose_is_primitive_and_exact(self):
        cases = ([(a, "+", b) for a in range(1, 400, 7) for b in range(1, 400, 11)]
                 + [(a, "-", b) for a in range(100, 999, 13) for b in range(1, 100, 3) if b <= a]
                 + [(a, "x", b) for a in range(2, 100) for b in range(2, 10)]
                 + [(a, "x", b) for a in range(2, 16) for b in (60, 7, 8)]
                 + [(b * q, "/", b) for b in range(2, 10) for q in range(1, 100)])
        for a, op, b in cases:
            subs = families.decompose(a, op, b)
            if subs is None:
                self.assertTrue(families.is_primitive(a, op, b))
                continue
            self.assertGreaterEqual(len(subs), 2)
            for x, o, y, z in subs:
                self.assertTrue(families.is_primitive(x, o, y), (a, op, b, subs))
                self.assertEqual(families.apply(o, x, y), z)
                if o == "/":
                    self.assertEqual(x % y, 0)
            self.assertEqual(subs[-1][3], families.apply(op, a, b), (a, op, b, subs))

    def test_examples(self):
        E = lambda a, op, b: ", ".join(families._eq(*t) for t in families.decompose(a, op, b))  # noqa: E731
        self.assertEqual(E(183, "+", 88), "183 + 80 = 263, 263 + 8 = 271")
        self.assertEqual(E(88, "+", 183), "183 + 80 = 263, 263 + 8 = 271")
        self.assertEqual(E(183, "-", 88), "183 - 80 = 103, 103 - 8 = 95")
        self.assertEqual(E(23, "x", 4), "20 x 4 = 80, 3 x 4 = 12, 80 + 12 = 92")
        self.assertEqual(E(216, "/", 4), "4 x 50 = 200, 216 - 200 = 16, 16 / 4 = 4, 50 + 4 = 54")
        self.assertIsNone(families.decompose(263, "+", 8))
        self.assertIsNone(families.decompose(80, "+", 12))
        self.assertEqual(families.work(23, "x", 4), "20 * 4 + 3 * 4 = 80 + 12 = ")


class Scorers(unittest.TestCase):
    def test_gsm8k(self):
        self.assertTrue(scorers.is_correct("gsm8k", "5 + 7 = 12. The answer is 12.", 12))
        self.assertTrue(scorers.is_correct("gsm8k", "The answer is 1,200 apples.", 1200))
        self.assertTrue(scorers.is_correct("gsm8k", "The answer is $12.", "12"))
        self.assertFalse(scorers.is_correct("gsm8k", "The answer is 13.", 12))
        self.assertFalse(scorers.is_correct("gsm8k", "So the answer is 12.", 12))  # case-sensitive, as klspec bench
        self.assertFalse(scorers.is_correct("gsm8k", "The answer is 13. The answer is 12.", 12))  # first one counts
        self.assertFalse(scorers.is_correct("gsm8k", "12", 12))

    def test_mmlu_pro_cascade(self):
        self.assertEqual(scorers.extract("mmlu-pro", "so the answer is (C)."), "C")
        self.assertEqual(scorers.extract("mmlu-pro", "The answer is D."), "D")
        self.assertEqual(scorers.extract("mmlu-pro", "blah\nAnswer: G"), "G")
        self.assertEqual(scorers.extract("mmlu-pro", "I pick B, no, E is right"), "E")
        self.assertEqual(scorers.extract("mmlu-pro", "The answer is (B). Answer: C"), "B")
        self.assertIsNone(scorers.extract("mmlu-pro", "no letter here"))
        self.assertFalse(scorers.is_correct("mmlu-pro", "The answer is (B).", "C"))

    def test_lcb_output(self):
        self.assertTrue(scorers.is_correct("lcb-output", "x = 3.\nOutput: 3", "3"))
        self.assertTrue(scorers.is_correct("lcb-output", "Output: 1\nOutput:  42  \n", "42"))
        self.assertFalse(scorers.is_correct("lcb-output", "Output: 42.", "42"))
        self.assertFalse(scorers.is_correct("lcb-output", "It prints 42.", "42"))


class Tokenization(unittest.TestCase):
    """Everything tokenizes sensibly with tok512: short, digits as single pieces, byte fallback only
    for '=' and newline."""

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(REPO, "tools", "training"))
        from tok512 import DEFAULT_PATH, Tok512
        if not os.path.exists(DEFAULT_PATH):
            raise unittest.SkipTest(f"{DEFAULT_PATH} missing")
        cls.tok = Tok512()

    def test_lengths_and_byte_fallback(self):
        allowed_bytes = {3 + ord("="), 3 + ord("\n")}
        for fam in FAMILIES:
            gen = families.problems("train", seed=2, families=[fam])
            for _ in range(60):
                r = next(gen)
                ids = self.tok.encode(r["question"]) + self.tok.encode(" " + r["answer"], add_prefix_space=False)
                self.assertLessEqual(len(ids) + 2, 440, r["question"])
                bytes_used = {i for i in ids if 3 <= i < 3 + 256}
                self.assertLessEqual(bytes_used, allowed_bytes, (r["question"], r["answer"]))
                self.assertEqual(self.tok.decode(self.tok.encode(r["question"])), r["question"])


if __name__ == "__main__":
    unittest.main()
