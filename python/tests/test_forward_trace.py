# forward's arrays, and the judged positions of a run as numpy arrays.
import numpy as np



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
