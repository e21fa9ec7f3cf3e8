"""The fake server's API-side work, for the slowdown tests: an output loop on a thread of the API process that busies Python beside the engine child's steps, never on their path."""

from __future__ import annotations

import threading
import time

PROCESS_S = 0.001  # busy Python, as vLLM's output processor turning outputs into text
PAUSE_S = 0.003  # then waiting for the next outputs


def busy(seconds: float) -> None:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        sum(index * index for index in range(50))


class OutputLoop:
    def process(self) -> None:
        busy(PROCESS_S)

    def run(self) -> None:
        while True:
            self.process()
            time.sleep(PAUSE_S)


def start() -> None:
    threading.Thread(target=OutputLoop().run, name="output-loop", daemon=True).start()


# The engine table of the slowdown tests: fake_engine_loop's, and the output loop as the API's detokenizer.
TABLE_ROW = '  ["detokenizer", "fake_api_work", "OutputLoop.process"],\n'
