# The official `openai` Python client (pinned in tools/lm_eval/requirements.txt) against `klspec serve`, as the
# Node client is in tests/server: legacy completions with echo and logprobs, chat, streaming, klspec's own
# fields through extra_body, and errors as the client's exception types.
import numpy as np
import openai
import pytest

from conftest import TARGET, THREADS


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0)


def test_completion_echo_gives_the_targets_prompt_logprobs(client):
    import klspec
    engine = klspec.Engine(TARGET, threads=THREADS)
    prompt = engine.tokenize("Q: Tom has 3 apples and buys 4 more. How many apples does he have?\nA:", add_bos=True)
    out = client.completions.create(model="testbed", prompt=prompt, max_tokens=2, echo=True, logprobs=1, temperature=0)
    logprobs = out.choices[0].logprobs
    assert len(logprobs.tokens) == len(prompt) + 2
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    logits = engine.forward(prompt).astype(np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    expected = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    for i in range(1, len(prompt)):
        assert logprobs.token_logprobs[i] == pytest.approx(expected[i - 1, prompt[i]], abs=1e-4)
        assert max(logprobs.top_logprobs[i].values()) == pytest.approx(expected[i - 1].max(), abs=1e-4)
    assert logprobs.text_offset == sorted(logprobs.text_offset)
    assert out.choices[0].text == "".join(logprobs.tokens)
    assert out.usage.prompt_tokens == len(prompt) and out.usage.completion_tokens == 2


def test_chat_and_streaming_agree(client):
    messages = [{"role": "user", "content": "Q: Reverse the word cat.\nA:"}]
    plain = client.chat.completions.create(model="testbed", messages=messages, max_tokens=12, temperature=0,
                                           logprobs=True, top_logprobs=2)
    content = plain.choices[0].message.content
    assert content and len(plain.choices[0].logprobs.content) == plain.usage.completion_tokens
    assert all(len(entry.top_logprobs) == 2 for entry in plain.choices[0].logprobs.content)
    stream = client.chat.completions.create(model="testbed", messages=messages, max_tokens=12, temperature=0, stream=True)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == content
    text = client.completions.create(model="testbed", prompt="Q: 2 plus 3?\nA:", max_tokens=12, temperature=0).choices[0].text
    streamed = client.completions.create(model="testbed", prompt="Q: 2 plus 3?\nA:", max_tokens=12, temperature=0, stream=True)
    assert "".join(chunk.choices[0].text for chunk in streamed) == text


def test_judge_fields_pass_through_extra_body(client):
    out = client.completions.create(model="testbed", prompt="Q: Sam has 12 pens and 30 more. How many pens?\nA:",
                                    max_tokens=40, temperature=0,
                                    extra_body={"judge": "kl", "judge_threshold": 1e9, "confidence_mask": 1.0})
    speculative = out.model_extra["speculative"]
    assert speculative["judge"] == "kl" and speculative["relaxed"] > 0


def test_errors_are_the_clients_exception_types(client):
    with pytest.raises(openai.BadRequestError) as bad_judge:
        client.completions.create(model="testbed", prompt="x", extra_body={"judge": "oracle"})
    assert bad_judge.value.status_code == 400 and bad_judge.value.body["param"] == "judge"
    with pytest.raises(openai.BadRequestError) as bad_echo:
        client.completions.create(model="testbed", prompt="x", echo=True, stream=True)
    assert bad_echo.value.body["param"] == "echo"
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="testbed", input="x")
