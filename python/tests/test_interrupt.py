# Ctrl-C stops a long decoding call between steps (the GIL is released while decoding, signals checked).
import os
import signal
import threading
import time

import pytest



@pytest.mark.parametrize("batch", [False, True])
def test_ctrl_c_stops_decoding(stories, batch):
    # Unstopped, 2000 tokens take stories260K several seconds (more per prompt in a batch).
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        if batch:
            stories.generate_batch(["Once upon a time"] * 3, max_tokens=2000)
        else:
            stories.generate("Once upon a time", max_tokens=2000)
    assert time.monotonic() - started < 2.0
    assert len(stories.generate("Once upon a time", max_tokens=4).tokens) == 4
