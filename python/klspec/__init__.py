"""klspec: judge decoding (speculative decoding with a relaxing judge) over llama.cpp."""
from klspec._klspec import *  # noqa: F401,F403
