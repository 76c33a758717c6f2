"""Benchmark of the command line's refusals and of --check: how long a user waits for the answer.

    python bench/cli_bench.py [--runs 5] [--no-server]

The tests show *that* these runs stop early (no model load began, nothing left running, the message
names the cause and the remedy); this script measures *how fast*, as a user would see it: each
command run as a process of its own, `--runs` times, with the median and the range of wall seconds.

- `--full` against a dead server (a port nothing listens on): a bare connection, refused;
- `--full` with vLLM colocated on a machine without CUDA: refused before anything is imported;
- `--full` against a real Wordle server that holds 2 sessions (the Wordle kit's uvicorn app, on
  loopback), where training needs 32: the preflight's refusal (skipped without the kit, or --no-server);
- `--check env_rollout:GuessEnv`: the whole check of the lab's own environment.

Exits 0 whatever the figures are; read them. Quiet machines give the smaller figures.
"""

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def timed(args: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "env_rollout.py", *args], cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - started, run.returncode


class WordleServer:
    """The Wordle kit's real server on a loopback port, holding `sessions` at once."""

    def __init__(self, sessions: int):
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        environment = {**os.environ, "MAX_CONCURRENT_ENVS": str(sessions), "ENABLE_WEB_INTERFACE": "false"}
        command = ["uvicorn", "textarena_env.server.app:app", "--host", "127.0.0.1", "--port", str(port)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", *command], env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def __enter__(self):
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2).read()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError("the Wordle server did not start") from None
                time.sleep(0.5)

    def __exit__(self, *exc):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--no-server", action="store_true", help="skip the run against a real Wordle server")
    options = parser.parse_args()
    if options.runs < 1:
        parser.error(f"--runs must be at least 1, got {options.runs}")
    cases = [
        (
            "--full, dead server (http://127.0.0.1:9)",
            ["--full", "--vllm-mode", "none", "--env-url", "http://127.0.0.1:9"],
        ),
        ("--full, vLLM colocated, no CUDA", ["--full"]),
        ("--check env_rollout:GuessEnv", ["--check", "env_rollout:GuessEnv"]),
    ]
    try:
        import textarena_env  # noqa: F401
    except ImportError:
        options.no_server = True
        print("(the Wordle kit is not installed: no run against a real server)")
    with contextlib.ExitStack() as stack:
        if not options.no_server:
            server = stack.enter_context(WordleServer(sessions=2))
            cases.append(
                ("--full, real server holding 2 of 32", ["--full", "--vllm-mode", "none", "--env-url", server.url])
            )
        print(f"{'command':<42} {'exit':>4} {'median s':>9} {'min s':>7} {'max s':>7}  ({options.runs} runs each)")
        for name, args in cases:
            walls, codes = zip(*(timed(args) for _ in range(options.runs)), strict=True)
            print(
                f"{name:<42} {','.join(sorted(set(map(str, codes)))):>4} {statistics.median(walls):>9.2f} "
                f"{min(walls):>7.2f} {max(walls):>7.2f}",
                flush=True,
            )
    print(f"(python {sys.version.split()[0]}, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
