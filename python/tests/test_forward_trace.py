# forward's arrays, and the judged positions of a run as numpy arrays.
import numpy as np
import pytest



def test_forward_shapes_and_argmax_is_the_first_greedy_token(stories):
    prompt = "Once upon a time"
    tokens = stories.tokenize(prompt, parse_special=True)
    logits, hidden = stories.forward(tokens, hidden=True)
    assert logits.shape == (len(tokens), stories.n_vocab)
    assert hidden.shape == (len(tokens), stories.n_embd)
    assert logits.dtype == np.float32 and np.isfinite(logits).all()
    first = stories.generate(prompt, max_tokens=1, draft_policy="off").tokens[0]
    assert int(np.argmax(logits[-1])) == first
    assert stories.forward(tokens).shape == logits.shape


def test_trace_arrays_have_one_entry_per_judged_position(stories):
    result = stories.generate("Once upon a time", max_tokens=40, draft_max=4, draft_policy="fixed", trace=True)
    trace = result.trace
    lengths = {name: len(column) for name, column in trace.items()}
    assert len(set(lengths.values())) == 1 and lengths["kl"] > 0
    assert trace["accepted"].sum() == result.stats.accepted
    assert trace["relaxed"].sum() == result.stats.relaxed_accepted == 0
    assert (trace["kl"] >= -1e-9).all()
    assert ((trace["target_max_probability"] > 0) & (trace["target_max_probability"] <= 1)).all()
    assert stories.generate("Once upon a time", max_tokens=4).trace is None


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def test_each_trace_row_describes_the_position_it_names(stories):
    # Row by row against the teacher-forced distributions of the final text (the prefix before a judged
    # position is final): the target's argmax, its confidence and entropy, the draft token's rank, the KL to
    # the draft's distribution, and vanilla's verdict; a row shifted against another column fails here.
    prompt = "Once upon a time"
    result = stories.generate(prompt, max_tokens=40, draft_max=4, draft_policy="fixed", trace=True)
    tokens = stories.tokenize(prompt, parse_special=True) + list(result.tokens)
    target = log_softmax(stories.forward(tokens).astype(np.float64))
    draft = log_softmax(stories.forward(tokens, model="draft").astype(np.float64))
    trace = result.trace
    assert len(trace["position"]) > 10 and (~trace["accepted"]).any()
    # In the order they were judged: the first draft token right after the prompt, each row a later position.
    assert trace["position"][0] == len(stories.tokenize(prompt, parse_special=True))
    assert (np.diff(trace["position"]) > 0).all()
    for row, position in enumerate(trace["position"]):
        logp, logq = target[position - 1], draft[position - 1]
        p = np.exp(logp)
        drafted = trace["draft_token"][row]
        assert trace["target_token"][row] == np.argmax(logp), row
        assert trace["target_max_probability"][row] == pytest.approx(p.max(), abs=1e-3), row
        assert trace["target_entropy"][row] == pytest.approx(-(p * logp).sum(), abs=1e-3), row
        assert trace["draft_rank"][row] == (logp > logp[drafted]).sum(), row
        assert trace["kl"][row] == pytest.approx((p * (logp - logq)).sum(), rel=0.05, abs=0.02), row
        assert trace["accepted"][row] == (drafted == np.argmax(logp)), row
        assert tokens[position] == (drafted if trace["accepted"][row] else np.argmax(logp)), row


def test_a_loose_kl_judge_relaxes_positions(stories):
    result = stories.generate("Once upon a time", max_tokens=40, draft_max=4, draft_policy="fixed",
                              judge="kl", threshold=1e9, confidence_mask=1.0, trace=True)
    assert result.stats.relaxed_accepted > 0
    assert result.trace["relaxed"].sum() == result.stats.relaxed_accepted
    assert (result.trace["judged"] >= result.trace["relaxed"]).all()


def test_a_judge_span_keeps_the_rule_inside_it(stories):
    options = dict(max_tokens=64, draft_max=4, draft_policy="fixed", judge="kl", threshold=1e9, confidence_mask=1.0,
                   trace=True)
    confined = stories.generate("Once upon a time", judge_span="until:.", **options)
    trace = confined.trace
    assert confined.stats.outside_span > 0 and confined.stats.span_blocked > 0
    assert not (trace["relaxed"] & ~trace["in_span"]).any()  # nothing relaxed outside
    assert (~trace["in_span"] & trace["judged"]).sum() >= confined.stats.span_blocked
    assert stories.generate("Once upon a time", **options).trace["in_span"].all()


def test_batch_traces_are_per_prompt(stories):
    prompts = ["Once upon a time", "Lily wanted a", "The little dog", "One day, Tom"]
    options = dict(max_tokens=16, draft_max=4, draft_policy="fixed", trace=True)
    batch = stories.generate_batch(prompts, **options)
    for result in batch:
        assert result.trace["accepted"].sum() == result.stats.accepted
        assert (result.trace["position"] >= result.stats.prompt_tokens).all()
    singles = [stories.generate(p, **options) for p in prompts]
    for one, many in zip(singles, batch):
        np.testing.assert_array_equal(one.trace["position"], many.trace["position"])


def test_logprobs_are_the_targets_at_every_emitted_token(stories):
    # Relaxed tokens included: each emitted token's logprob and alternatives are the target's teacher-forced
    # distribution at its position, never the draft's.
    prompt = "Once upon a time"
    result = stories.generate(prompt, max_tokens=40, draft_max=4, draft_policy="fixed", judge="kl", threshold=1e9,
                              confidence_mask=1.0, logprobs=2)
    assert result.stats.relaxed_accepted > 0
    prompt_tokens = stories.tokenize(prompt, parse_special=True)
    tokens = prompt_tokens + list(result.tokens)
    target = log_softmax(stories.forward(tokens).astype(np.float64))
    for i, entry in enumerate(result.logprobs):
        row = target[len(prompt_tokens) + i - 1]
        assert entry["token"] == tokens[len(prompt_tokens) + i]
        assert entry["logprob"] == pytest.approx(row[entry["token"]], abs=1e-3), i
        assert entry["top"][0][0] == np.argmax(row) and entry["top"][0][1] == pytest.approx(row.max(), abs=1e-3), i
