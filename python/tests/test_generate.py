# generate, generate_batch and stream against the CLI and each other.
import json
import subprocess

import pytest

import klspec
from conftest import CLI, DEFAULT_DRAFT, DEFAULT_TARGET, STORIES, STORIES_Q4, THREADS

STORY_PROMPTS = ["Once upon a time", "Lily wanted a", "The little dog", "One day, Tom"]


def cli_generate(target, draft, prompt, *flags):
    command = [CLI, "generate", "-m", target, "-md", draft, "-p", prompt, "-t", str(THREADS), "--json", *flags]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


@pytest.mark.parametrize("draft_max", [1, 4])
def test_greedy_stories_equals_cli(stories, draft_max):
    result = stories.generate("Once upon a time", max_tokens=40, draft_max=draft_max, draft_policy="fixed")
    cli = cli_generate(STORIES, STORIES_Q4, "Once upon a time", "-n", "40", "--draft-max", str(draft_max),
                       "--draft-policy", "fixed")
    assert result.tokens == cli["tokens"]
    assert result.text == cli["text"]
    assert result.stop_reason == cli["stop_reason"]
    assert result.stats.target_calls == cli["stats"]["target_calls"]
    assert result.stats.accepted == cli["stats"]["accepted"]


def test_greedy_default_pair_equals_cli(testbed):
    prompt = "Question: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer:"
    result = testbed.generate(prompt, max_tokens=32, draft_max=4, draft_policy="fixed")
    cli = cli_generate(DEFAULT_TARGET, DEFAULT_DRAFT, prompt, "-n", "32", "--draft-max", "4", "--draft-policy", "fixed")
    assert result.tokens == cli["tokens"]
    assert result.text == cli["text"]
    assert result.stats.target_calls == cli["stats"]["target_calls"]


def test_stats_count_the_run(stories):
    result = stories.generate("Once upon a time", max_tokens=30, draft_max=4, draft_policy="fixed")
    stats = result.stats
    assert stats.emitted == len(result.tokens) == 30
    assert result.stop_reason == "max_tokens"
    assert stats.prompt_tokens == len(stories.tokenize("Once upon a time"))
    assert 0 < stats.accepted <= stats.drafted
    assert stats.relaxed_accepted == 0
    assert stats.mat == pytest.approx(stats.emitted / stats.target_calls)
    assert stats.tokens_per_second > 0


def test_stop_string_cuts_the_text(stories):
    full = stories.generate("Once upon a time", max_tokens=40)
    word = full.text.split()[3]
    stopped = stories.generate("Once upon a time", max_tokens=40, stop=[word])
    assert stopped.stop_reason == "stop_string"
    assert word not in stopped.text
    assert full.text.startswith(stopped.text)


def test_batch_equals_one_at_a_time(stories):
    options = dict(max_tokens=24, draft_max=4, draft_policy="fixed")
    batch = stories.generate_batch(STORY_PROMPTS, **options)
    assert [r.tokens for r in batch] == [stories.generate(p, **options).tokens for p in STORY_PROMPTS]


def test_stream_pieces_make_the_result(stories):
    options = dict(max_tokens=24, draft_max=4, draft_policy="fixed")
    stream = stories.stream("Once upon a time", **options)
    steps = list(stream)
    assert steps and steps[-1].is_last and not any(s.is_last for s in steps[:-1])
    assert [t for s in steps for t in s.tokens] == stream.result.tokens
    assert "".join(s.text for s in steps) == stream.result.text
    assert stream.result.tokens == stories.generate("Once upon a time", **options).tokens


def test_logprobs_one_per_token(stories):
    result = stories.generate("Once upon a time", max_tokens=8, logprobs=2)
    assert [entry["token"] for entry in result.logprobs] == result.tokens
    assert all(len(entry["top"]) == 2 and entry["logprob"] <= 0 for entry in result.logprobs)


def test_an_unfinished_stream_holds_the_engine(stories):
    # draft_max 4: at most 5 tokens a step, so one step leaves the 32-token stream unfinished.
    stream = stories.stream("Once upon a time", max_tokens=32, draft_max=4)
    next(stream)
    with pytest.raises(klspec.Error, match="the engine is busy"):
        stories.generate("Once upon a time", max_tokens=4)
    with pytest.raises(klspec.Error, match="the engine is busy"):
        stories.stream("Once upon a time")
    list(stream)
    assert len(stories.generate("Once upon a time", max_tokens=4).tokens) == 4
    abandoned = stories.stream("Once upon a time", max_tokens=32, draft_max=4)
    next(abandoned)
    del abandoned
    assert len(stories.generate("Once upon a time", max_tokens=4).tokens) == 4
