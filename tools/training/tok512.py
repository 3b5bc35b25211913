"""SentencePiece-compatible encoder/decoder for the 512-token stories260K vocabulary.

Reads llama2.c's tokenizer.bin (max_token_length, then per token: f32 score, i32 length, bytes) and
encodes with the same algorithm as llama2.c's run.c (and llama.cpp's SPM tokenizer): a dummy-prefix
space, one piece per UTF-8 character (byte fallback <0xXX> = id 3 + byte when a character has no
piece), then repeatedly merge the adjacent pair whose concatenation is a piece with the highest score.
"""
import os
import struct

BOS_ID, EOS_ID = 1, 2
# The workplace's shared/ folder sits beside the repository: <repo>/../shared/models/stories260K.
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STORIES_DIR = os.path.join(os.path.dirname(_REPO), "shared", "models", "stories260K")
DEFAULT_PATH = os.environ.get("KLSPEC_TOK512", os.path.join(STORIES_DIR, "tok512.bin"))


class Tok512:
    def __init__(self, path=DEFAULT_PATH, vocab_size=512):
        self.pieces, self.scores = [], []
        with open(path, "rb") as f:
            f.read(4)  # max_token_length: not needed in Python
            for _ in range(vocab_size):
                score, length = struct.unpack("<fi", f.read(8))
                self.pieces.append(f.read(length).decode("utf-8", errors="replace"))
                self.scores.append(score)
        # The first 3 + 256 ids are <unk>, <s>, </s> and the byte-fallback pieces; only the rest are
        # text pieces that encoding may produce directly.
        self.piece_to_id = {p: i for i, p in enumerate(self.pieces) if i >= 3 + 256}
        self._cache = {}

    def encode(self, text, add_prefix_space=True):
        """Token ids of text (no BOS/EOS). add_prefix_space mirrors SentencePiece's dummy prefix, which
        llama.cpp adds to a prompt; pass False when encoding a continuation of already-encoded text."""
        key = (text, add_prefix_space)
        if key in self._cache:
            return list(self._cache[key])
        if add_prefix_space and text:
            text = " " + text
        ids = []
        for ch in text:
            if ch in self.piece_to_id:
                ids.append(self.piece_to_id[ch])
            else:
                ids.extend(3 + b for b in ch.encode("utf-8"))
        while True:  # greedy best-score pair merge, as in llama2.c
            best_score, best_i, best_id = -1e30, -1, -1
            for i in range(len(ids) - 1):
                merged = self.pieces[ids[i]] + self.pieces[ids[i + 1]]
                mid = self.piece_to_id.get(merged)
                if mid is not None and self.scores[mid] > best_score:
                    best_score, best_i, best_id = self.scores[mid], i, mid
            if best_i < 0:
                break
            ids[best_i:best_i + 2] = [best_id]
        if len(self._cache) < 200000:
            self._cache[key] = tuple(ids)
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            if i in (0, BOS_ID, EOS_ID):
                continue
            if 3 <= i < 3 + 256:
                out.append(i - 3)
            else:
                out += self.pieces[i].encode("utf-8")
        text = out.decode("utf-8", errors="replace")
        return text[1:] if text.startswith(" ") else text  # drop the dummy prefix


if __name__ == "__main__":
    import sys
    tok = Tok512()
    for s in sys.argv[1:] or ["Q: Sam has 12 apples. He buys 7 more.\nA: 12 + 7 = 19. The answer is 19."]:
        ids = tok.encode(s)
        print(len(ids), ids)
        print([tok.pieces[i] for i in ids])
        assert tok.decode(ids) == s, tok.decode(ids)
