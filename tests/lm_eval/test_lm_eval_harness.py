# EleutherAI's lm-evaluation-harness (pinned, scripts/setup-lm-eval.sh) against `klspec serve` on the default
# pair, checked against klspec's own numbers: loglikelihoods against the engine's teacher-forced forward,
# generations against `klspec bench` (vanilla and a KL judge chosen through --gen_kwargs), chat generations
# against `klspec bench` on the same questions in the server's chat template. Run by CTest (label lm-eval)
# with the venv's python.
import json
import math
import os
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

from conftest import CLI, DECODING, SOURCE_DIR, TARGET, THREADS

TASKS = str(SOURCE_DIR / "tools/lm_eval/tasks")
WORD_PROBLEMS = "data/testbed_word_test.jsonl"
MAX_TOKENS = 256  # the task file's max_gen_toks
KL = {"judge": "kl", "judge_threshold": 0.3}


def relaxed_tokens(url):
    metrics = urllib.request.urlopen(url + "/metrics").read().decode()
    line = next(l for l in metrics.splitlines() if l.startswith("klspec:spec_decode_num_relaxed_accepted_tokens_total"))
    return float(line.split()[1])


def lm_eval(tmp_path, model, model_args, task, limit, gen_kwargs=None, chat=False):
    """Runs the harness's CLI from the repository root (the task files' data paths are relative); its samples."""
    out = tmp_path / f"{task}-{model}-{len(list(tmp_path.iterdir()))}"
    command = [sys.executable, "-m", "lm_eval", "--model", model, "--model_args", model_args, "--tasks", task,
               "--include_path", TASKS, "--limit", str(limit), "--log_samples", "--output_path", str(out)]
    if gen_kwargs:
        command += ["--gen_kwargs", ",".join(f"{k}={v}" for k, v in gen_kwargs.items())]
    if chat:
        command += ["--apply_chat_template"]
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TQDM_DISABLE="1")
    run = subprocess.run(command, cwd=SOURCE_DIR, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    (samples_file,) = out.glob("*/samples_*.jsonl")
    return sorted((json.loads(line) for line in samples_file.open()), key=lambda s: s["doc_id"])


def bench(tmp_path, limit, extra, dataset=str(SOURCE_DIR / WORD_PROBLEMS)):
    out = tmp_path / f"bench-{len(list(tmp_path.iterdir()))}.jsonl"
    subprocess.run([CLI, "bench", "--dataset", dataset, "--limit", str(limit), "-n", str(MAX_TOKENS), "--stop", "\nQ:",
                    *DECODING, "--outputs", str(out), *extra], check=True, capture_output=True, timeout=600)
    return [json.loads(line)["text"] for line in out.open()]


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def test_loglikelihoods_are_the_engines_teacher_forced_logprobs(server, tmp_path):
    import klspec
    samples = lm_eval(tmp_path, "local-completions",
                      f"base_url={server}/v1/completions,tokenizer_backend=remote,num_concurrent=1,max_retries=1",
                      "klspec_testbed_choice", limit=12)  # 120 loglikelihoods: each checked alike, so a sample
    assert len(samples) == 12
    engine = klspec.Engine(TARGET, threads=THREADS)
    # The harness's tokenization (remote: our /tokenize, no BOS): the whole text's tokens, split at the
    # context's length.
    tokenize = lambda text: engine.tokenize(text, add_bos=False, parse_special=True)
    checked_tokens, correct = 0, 0
    for sample in samples:
        sums = []
        for request, response in zip(sample["arguments"].values(), sample["resps"]):
            context, continuation = request["arg_0"], request["arg_1"]
            whole, context_tokens = tokenize(context + continuation), tokenize(context)
            n = len(context_tokens)
            logprobs = log_softmax(engine.forward(whole).astype(np.float64))
            ours = [logprobs[i - 1, whole[i]] for i in range(n, len(whole))]
            greedy = all(int(np.argmax(logprobs[i - 1])) == whole[i] for i in range(n, len(whole)))
            harness_logprob, harness_greedy = float(response[0][0]), response[0][1] == "True"
            assert math.isclose(harness_logprob, sum(ours), abs_tol=1e-3 * len(ours)), (context, continuation)
            assert harness_greedy == greedy
            sums.append(sum(ours))
            checked_tokens += len(ours)
        gold = "ABCDEFGHIJ".index(sample["target"])
        assert sample["acc"] == float(int(np.argmax(sums)) == gold)
        correct += int(np.argmax(sums)) == gold
    assert checked_tokens >= 120
    print(f"{len(samples)} problems, {checked_tokens} continuation tokens, accuracy {correct}/{len(samples)}")


@pytest.mark.parametrize("judge", [None, KL], ids=["vanilla", "kl"])
def test_generations_are_klspec_benchs(server, tmp_path, judge):
    relaxed_before = relaxed_tokens(server)
    # Text prompts (tokenized_requests=False): the server tokenizes them with BOS, as bench does.
    samples = lm_eval(tmp_path, "local-completions",
                      f"base_url={server}/v1/completions,tokenizer_backend=remote,tokenized_requests=False,"
                      f"num_concurrent=1,max_retries=1,max_gen_toks={MAX_TOKENS}",
                      "klspec_testbed_word", limit=6, gen_kwargs=judge)
    relaxed = relaxed_tokens(server) - relaxed_before
    expected = bench(tmp_path, 6, ["--judge", "kl", "--judge-threshold", "0.3"] if judge else [])
    assert [s["resps"][0][0] for s in samples] == expected
    # The judge fields reached the server: KL relaxed tokens there, vanilla none.
    assert (relaxed > 0) if judge else (relaxed == 0)


def test_chat_generations_are_klspec_benchs_with_the_chat_template(server, tmp_path):
    import jinja2
    samples = lm_eval(tmp_path, "local-chat-completions",
                      f"base_url={server}/v1/chat/completions,num_concurrent=1,max_retries=1,max_gen_toks={MAX_TOKENS}",
                      "klspec_testbed_word", limit=4, chat=True)
    # The testbed has no template of its own: the server applies chatml, as llama-server. bench gets the same
    # prompts rendered with the template the server reports (/tokenizer_info), as plain prompts.
    info = json.load(urllib.request.urlopen(server + "/tokenizer_info"))
    template = jinja2.Environment().from_string(info["chat_template"])
    rendered = tmp_path / "chat_prompts.jsonl"
    with rendered.open("w") as out:
        for line in list((SOURCE_DIR / WORD_PROBLEMS).open())[:4]:
            question = json.loads(line)["question"]
            prompt = template.render(messages=[{"role": "user", "content": question}], add_generation_prompt=True)
            out.write(json.dumps({"question": prompt}) + "\n")
    assert [s["resps"][0][0] for s in samples] == bench(tmp_path, 4, ["--chat", "off"], dataset=str(rendered))
