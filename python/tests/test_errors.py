# Bad arguments raise klspec.Error (a RuntimeError) with klspec's one-line message; rules() lists the judges.
import pytest

import klspec


def test_missing_model_file():
    with pytest.raises(klspec.Error, match="no-such-model.gguf") as error:
        klspec.Engine("/nonexistent/no-such-model.gguf")
    assert "\n" not in str(error.value)
    assert isinstance(error.value, RuntimeError)


def test_unknown_judge(stories):
    with pytest.raises(klspec.Error, match="unknown judge 'nope'"):
        stories.generate("Once", judge="nope")


def test_negative_max_tokens(stories):
    with pytest.raises(klspec.Error, match="max tokens must be >= 0, got -1"):
        stories.generate("Once", max_tokens=-1)


def test_unknown_draft_policy_and_keyword(stories):
    with pytest.raises(klspec.Error, match="unknown draft policy 'often'"):
        stories.generate("Once", draft_policy="often")
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_token'"):
        stories.generate("Once", max_token=3)


def test_judge_knobs_are_checked(stories):
    with pytest.raises(klspec.Error, match="threshold"):
        stories.generate("Once", judge="kl")


def test_bad_judge_spans(stories):
    with pytest.raises(klspec.Error, match="unknown judge span 'often'"):
        stories.generate("Once", judge_span="often")
    with pytest.raises(klspec.Error, match="marks no reasoning span"):
        stories.generate("Once", judge_span="think")  # stories260K has no template: chatml has no reasoning


def test_rules_table():
    rules = {rule["name"]: rule for rule in klspec.rules()}
    assert list(rules)[0] == "vanilla"
    assert rules["kl"]["threshold"] == "required"
    assert rules["topk"]["topk"] == "required"
    assert rules["vanilla"]["threshold"] == "refused"
    assert rules["fsd"]["divergence"] == "optional"
    assert rules["kl"]["divergence"] == "refused"
