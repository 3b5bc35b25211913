"""The three scorers of the testbed, each the one its real benchmark uses (see shared/datasets/README.md).

  gsm8k       the number after the FIRST "The answer is " (case-sensitive, as klspec bench's
              src/core/answer_scoring.cpp), else the first number in the LAST \\boxed{...} (what
              instruct models write), thousands commas and "$" stripped, compared as numbers
  mmlu-pro    MMLU-Pro's cascade: `answer is \\(?([A-J])\\)?`, then `.*[aA]nswer:\\s*([A-J])`, then the
              last standalone letter A-J; compared with the gold letter
  lcb-output  the text after the LAST "Output:" up to the end of that line, stripped, equal to the
              stripped gold output (exact string match, as LiveCodeBench compares stripped outputs)
"""
import re

_GSM8K = re.compile(r"The answer is \$?(-?[\d,]*\d(?:\.\d+)?)")
_NUMBER = re.compile(r"-?[\d,]*\d(?:\.\d+)?")
_MMLU_1 = re.compile(r"answer is \(?([A-J])\)?")
_MMLU_2 = re.compile(r".*[aA]nswer:\s*([A-J])", re.DOTALL)
_MMLU_3 = re.compile(r"\b[A-J]\b(?!.*\b[A-J]\b)", re.DOTALL)


def _last_boxed(text):
    """The content of the last \\boxed{...}, braces balanced (core/answer_scoring.cpp's last_boxed)."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1:j]
    return None


def extract_gsm8k(text):
    m = _GSM8K.search(text)
    if not m:
        boxed = _last_boxed(text)
        m = _NUMBER.search(boxed) if boxed is not None else None
        if not m:
            return None
    try:
        return float(m.group(m.lastindex or 0).replace(",", ""))
    except ValueError:
        return None


def extract_mmlu_pro(text):
    for rx in (_MMLU_1, _MMLU_2):
        m = rx.search(text)
        if m:
            return m.group(1)
    m = _MMLU_3.search(text)
    return m.group(0) if m else None


def extract_lcb_output(text):
    i = text.rfind("Output:")
    if i < 0:
        return None
    return text[i + len("Output:"):].split("\n", 1)[0].strip()


def extract(scorer, text):
    return {"gsm8k": extract_gsm8k, "mmlu-pro": extract_mmlu_pro, "lcb-output": extract_lcb_output}[scorer](text)


def is_correct(scorer, text, final):
    got = extract(scorer, text)
    if got is None:
        return False
    if scorer == "gsm8k":
        return got == float(final)
    return got == str(final).strip()
