"""Task sources for train.py: where training problems and validation problems come from, and how an
answer is scored.

  testbed     the testbed v2 families (tools/testbed/families.py): word, choice, trace, mixed with
              --mix weights (per problem), each scored by its benchmark's scorer

The v1 pair's source, `reasoning`, was removed from the tree with its generator; both are in commit b46041d:
`git show b46041d:tools/training/tasks.py`, `git show b46041d:tools/reasoning_pair/taskgen.py`.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTBED = os.path.join(os.path.dirname(HERE), "testbed")


class TestbedTasks:
    name = "testbed"
    max_new = 320  # the longest word-problem solutions are ~315 tokens (decomposed steps, testbed v2)

    def __init__(self, mix="word=2,choice=1,trace=1", style_lean=0.0):
        sys.path.insert(0, TESTBED)
        import families
        import scorers
        self.fam, self.scorers = families, scorers
        weights = dict((k, float(v)) for k, v in (kv.split("=") for kv in mix.split(",")))
        for k in weights:
            if k not in families.FAMILIES:
                raise ValueError(f"--mix: unknown family {k!r} (families: {families.FAMILIES})")
        self.families = tuple(f for f in families.FAMILIES if weights.get(f, 0) > 0)
        self.weights = [weights[f] for f in self.families]
        self.style_lean = style_lean  # training answers only: validation keeps the uniform gold

    def train_stream(self, seed):
        for row in self.fam.problems("train", seed=seed, families=self.families, weights=self.weights,
                                         lean=self.style_lean):
            yield row["question"], row["answer"]

    def validation(self, n):
        """n problems in all, split evenly over the families (at least 1 each)."""
        return self.fam.take("validation", max(1, n // len(self.families)), families=self.families)

    def is_correct(self, text, row):
        return self.scorers.is_correct(row["scorer"], text, row["final"])


def get(name, mix=None, style_lean=0.0):
    if name == "testbed":
        return TestbedTasks(mix, style_lean) if mix else TestbedTasks(style_lean=style_lean)
    raise ValueError(f"unknown task source {name!r}")
