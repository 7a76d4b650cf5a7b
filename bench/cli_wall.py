"""The command line's wall time: each operator verb of `semantic-saga`, side by side with a bare interpreter start.

    .venv/bin/python bench/cli_wall.py [--rounds 10]     # this phase alone; `make bench` runs it as phase `cli`
    .venv/bin/python bench/cli_wall.py --before DIR      # also each verb of another checkout, in the same rounds

`--before DIR` runs every verb a second time from DIR (`git archive REF | tar -x -C DIR`: that commit's code, on
this virtualenv's packages, the same database), interleaved with this checkout's, so a before/after comparison
shares the machine's load. Such code may predate the per-user home: it is given DATABASE_URL and SECRET_KEY.

A local user's set-up, as the issue measured it: no DATABASE_URL, so the per-user home's SQLite database
(SAGA_HOME=bench/.work/cli-home, made afresh), in front of examples/demo_mcp_server.py through `semantic-saga proxy`
driven by the official `mcp` client. The session is seeded with a few calls (so `ledger`, `status`, `verify` and
`preview-report` have rows to read); each round then times, in a rotated order, one start of `python -c pass`
and one of every verb. `approve` and `deny` decide a real held call (a `send_email` the config gates) at a
pseudo-terminal, as a person does; the call is held again, untimed, before each. `approve` waits, as it always
does, until the proxy says it sent the call, so its figure includes the proxy noticing the decision.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import pty
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common

BIN = Path(sys.executable).parent
SCRIPT = str(BIN / "semantic-saga")
# What each sample runs: a bare interpreter start first, then the verbs, in the order the table lists them.
BARE = "python -c pass"
READ_VERBS = ("pending", "ledger", "status", "verify", "preview-report")
DECISIONS = ("approve", "deny")
LABELS = (BARE, *READ_VERBS, *DECISIONS)
# `approve` then watches until the proxy holding the call has sent it (the proxy looks every 0.5 s): a figure apart.
APPROVE_SENT = "approve, until the proxy sent the call"
FIGURES = (*LABELS, APPROVE_SENT)
DECIDED = {"approve": b"approved ", "deny": b"denied "}
BEFORE = "before: "  # labels of --before DIR's runs
HELD_TOOL = "send_email"
WAIT_SECONDS = 60.0
COMMAND_SECONDS = 60.0


def cli_env(home: Path) -> dict[str, str]:
    """This environment less every setting of ours (the bench's DATABASE_URL included): the home decides."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SAGA_", "DJANGO_", "OTEL_")) and k not in ("DATABASE_URL", "SECRET_KEY", "DEBUG")
    }
    return {**kept, "SAGA_HOME": str(home), "NO_COLOR": "1", "LOG_LEVEL": "WARNING"}


class Agent:
    """The official `mcp` client on its own event loop thread: one task opens and closes the session (anyio wants
    both in one task), calls run as tasks beside it, so a held call can wait while the bench goes on."""

    def __init__(self, command: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        from mcp import StdioServerParameters

        self.params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env, cwd=str(cwd))
        self.loop = asyncio.new_event_loop()
        self.ready = concurrent.futures.Future[None]()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._serve(),), daemon=True)
        self.thread.start()
        self.ready.result(timeout=WAIT_SECONDS)

    async def _serve(self) -> None:
        from mcp import Client
        from mcp.client.stdio import stdio_client

        self.queue: asyncio.Queue[tuple[str, dict[str, Any], concurrent.futures.Future[Any]] | None] = asyncio.Queue()
        try:
            async with Client(stdio_client(self.params), mode="legacy") as client:
                self.ready.set_result(None)
                pending: set[asyncio.Task[Any]] = set()
                while (item := await self.queue.get()) is not None:
                    tool, arguments, future = item
                    task = asyncio.create_task(client.call_tool(tool, arguments))
                    pending.add(task)
                    task.add_done_callback(lambda t, f=future: (pending.discard(t), _settle(f, t)))
                for task in pending:
                    task.cancel()
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            raise

    def call(self, tool: str, arguments: dict[str, Any]) -> concurrent.futures.Future[Any]:
        future = concurrent.futures.Future[Any]()
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (tool, arguments, future))
        return future

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)
        self.thread.join(timeout=WAIT_SECONDS)


def _settle(future: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        future.cancel()
    elif task.exception() is not None:
        future.set_exception(task.exception())  # type: ignore[arg-type]
    else:
        future.set_result(task.result())


def at_terminal(argv: list[str], env: dict[str, str], cwd: Path, marker: bytes) -> tuple[int, float, float]:
    """Run `argv` on a pseudo-terminal (approve and deny decide only there), typing yes; its exit status, the seconds
    until `marker` was printed (the decision made) and until it ended."""
    started = time.perf_counter()
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=cwd)
    finally:
        os.close(secondary)
    os.write(primary, b"yes\n")
    output, decided = b"", float("nan")
    try:
        while chunk := os.read(primary, 65536):
            output += chunk
            if decided != decided and marker in output:  # NaN until the marker shows
                decided = time.perf_counter() - started
    except OSError:  # EIO: the command ended and closed its side
        pass
    finally:
        os.close(primary)
    status = proc.wait(timeout=COMMAND_SECONDS)
    return status, decided, time.perf_counter() - started


class CliBench:
    def __init__(self, work: Path, before: Path | None = None) -> None:
        self.before = before
        self.work = work / "cli"
        shutil.rmtree(self.work, ignore_errors=True)
        self.project = self.work / "project"
        self.elsewhere = self.work / "elsewhere"
        for directory in (self.project, self.elsewhere):
            directory.mkdir(parents=True)
        self.env = cli_env(self.work / "home")
        for name in ("demo_mcp_server.py", "demo_pack.json"):
            shutil.copy2(common.ROOT / "examples" / name, self.project / name)
        config = {
            "servers": {
                "demo": {"command": sys.executable, "args": ["demo_mcp_server.py", "--state", "world.json"], "cwd": "."}
            },
            "packs": ["demo_pack.json"],
            "policy": {"tools": [{"tool": HELD_TOOL, "action": "confirm", "reason": "the bench decides it"}]},
        }
        (self.project / "saga.json").write_text(json.dumps(config), encoding="utf-8")
        self.agent: Agent | None = None

    def setup(self) -> None:
        """The real session, whose held calls approve and deny decide, with a few calls; then a short preview session,
        the newest, which `preview-report`, `ledger`, `status` and `verify` read by default."""
        command = [SCRIPT, "proxy", "--config", str(self.project / "saga.json")]
        self.agent = Agent(command, self.env, self.project)
        created = self.agent.call("create_contact", {"name": "Lin", "email": "lin@example.com"}).result(WAIT_SECONDS)
        contact = created.structured_content or {}
        for tool, arguments in (
            ("update_contact", {"id": contact.get("id", "c-1"), "email": "lin@example.org"}),
            ("list_contacts", {}),
            ("create_contact", {"name": "Ada", "email": "ada@example.com"}),
        ):
            self.agent.call(tool, arguments).result(WAIT_SECONDS)
        preview = Agent([*command, "--preview"], self.env, self.project)
        try:
            preview.call("list_contacts", {}).result(WAIT_SECONDS)
            preview.call("create_contact", {"name": "Dry", "email": "dry@example.com"}).result(WAIT_SECONDS)
        finally:
            preview.close()

    def before_env(self) -> dict[str, str]:
        assert self.before is not None
        database = Path(self.env["SAGA_HOME"]) / "semantic-saga.db"
        key = (Path(self.env["SAGA_HOME"]) / "secret_key").read_text(encoding="ascii").strip()
        return {**self.env, "PYTHONPATH": str(self.before), "DATABASE_URL": f"sqlite:///{database}", "SECRET_KEY": key}

    def run(self, label: str) -> dict[str, float]:
        """Seconds of wall time of one start of `label`, run from a directory of its own as a person's terminal."""
        if label.startswith(BEFORE):
            verb = label.removeprefix(BEFORE)
            if verb in DECISIONS:
                return self._decide(verb, label, self.before_env())
            return self._timed(label, [sys.executable, "-m", "saga_project.cli", verb], self.before_env())
        if label in DECISIONS:
            return self._decide(label, label, self.env)
        return self._timed(label, [sys.executable, "-c", "pass"] if label == BARE else [SCRIPT, label], self.env)

    def _timed(self, label: str, argv: list[str], env: dict[str, str]) -> dict[str, float]:
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=self.elsewhere, capture_output=True, timeout=COMMAND_SECONDS)
        seconds = time.perf_counter() - started
        if done.returncode != 0:  # a refusal would be timed as if it were the work
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
        return {label: seconds}

    def _decide(self, verb: str, label: str, env: dict[str, str]) -> dict[str, float]:
        assert self.agent is not None
        answer = self.agent.call(HELD_TOOL, {"to": "grace@example.com", "subject": "Hi", "body": verb})
        held = self._held_call()
        argv = [SCRIPT, verb] if env is self.env else [sys.executable, "-m", "saga_project.cli", verb]
        status, decided, ended = at_terminal([*argv, held, "--by", "bench"], env, self.elsewhere, DECIDED[verb])
        answer.result(WAIT_SECONDS)  # the agent hears the decision before the next call is held
        if status != 0:
            raise RuntimeError(f"semantic-saga {verb} {held} exited {status}")
        return (
            {label: decided}
            if verb == "approve" and label != verb
            else ({label: decided, APPROVE_SENT: ended} if verb == "approve" else {label: ended})
        )

    def _held_call(self) -> str:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            done = subprocess.run(
                [SCRIPT, "pending", "--json"], env=self.env, cwd=self.elsewhere, capture_output=True, text=True
            )
            rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
            if rows:
                return str(rows[0]["id"])
            time.sleep(0.1)
        raise RuntimeError(f"no held call within {WAIT_SECONDS:g}s")

    def close(self) -> None:
        if self.agent is not None:
            self.agent.close()


def measure(
    rounds: int,
    work: Path = common.WORK,
    report: Callable[[str], None] = common.progress,
    before: Path | None = None,
) -> dict[str, Any]:
    """Samples per label over `rounds` rounds, each round every label once in a rotated order."""
    bench = CliBench(work, before)
    labels = LABELS + (tuple(BEFORE + verb for verb in (*READ_VERBS, *DECISIONS)) if before else ())
    samples: dict[str, list[float]] = {figure: [] for figure in (*FIGURES, *labels[len(LABELS) :])}
    load = os.getloadavg()
    try:
        bench.setup()
        for round_no in range(rounds):
            shift = round_no % len(labels)
            for label in labels[shift:] + labels[:shift]:
                for figure, seconds in bench.run(label).items():
                    samples[figure].append(seconds)
            report(f"CLI round {round_no + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in samples.items()))
    finally:
        bench.close()
    return {"samples": samples, "loadavg_before": load, "loadavg_after": os.getloadavg(), "rounds": rounds}


LIMIT = 0.2  # issue 41: CLI verbs <= 0.2 s wall (issue 30's was 0.5 s)


def _verbs(samples: dict[str, list[float]]) -> list[str]:
    """The labels judged against the target: our verbs (not the bare start, the approve-until-sent figure or
    another checkout's runs)."""
    return [k for k, v in samples.items() if k not in (BARE, APPROVE_SENT) and not k.startswith(BEFORE) and v]


def targets(figures: dict[str, Any]) -> list[common.Target]:
    """One target per verb: its p50 wall time <= LIMIT, with the bare interpreter start beside it."""
    samples: dict[str, list[float]] = figures.get("samples", {})
    bare = common.median(samples.get(BARE, [])) if samples.get(BARE) else float("nan")
    out = []
    for label in _verbs(samples):
        values = samples[label]
        p50 = common.median(values)
        detail = (
            f"min-max {min(values):.3f}-{max(values):.3f} s; bare `{BARE}` {common.fmt(bare, 's')} "
            f"({common.fmt(p50 - bare, 's')} more)"
        )
        out.append(common.Target(f"CLI wall time: semantic-saga {label}, p50", p50, "<=", LIMIT, detail, unit="s"))
    return out


def rows(figures: dict[str, Any]) -> list[list[str]]:
    """Table rows for what has no target: the bare start, approve until sent, another checkout's verbs."""
    samples: dict[str, list[float]] = figures.get("samples", {})
    bare = common.median(samples.get(BARE, [])) if samples.get(BARE) else float("nan")
    verbs = set(_verbs(samples))
    out = []
    for label in samples:
        values = samples.get(label, [])
        if not values or label in verbs:
            continue
        p50 = common.median(values)
        name = label if label == BARE or label.startswith(BEFORE) else f"semantic-saga {label}"
        over = "" if label == BARE else f"{common.fmt(p50 - bare, 's')} more than the bare start"
        out.append(
            [
                f"CLI wall time: {name}, p50 (min-max)",
                f"{p50:.3f} s ({min(values):.3f}-{max(values):.3f})",
                "",
                "",
                over,
            ]
        )
    return out


def slowest_verb_p50(figures: dict[str, Any]) -> tuple[float, str]:
    samples: dict[str, list[float]] = figures.get("samples", {})
    verbs = [(common.median(samples[k]), k) for k in _verbs(samples)]
    return max(verbs) if verbs else (float("nan"), "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds of every label (default 10)")
    parser.add_argument("--before", type=Path, help="another checkout's tree whose verbs run in the same rounds")
    parser.add_argument("--json", type=Path, help="also write the samples to this file")
    args = parser.parse_args(argv)
    figures = measure(args.rounds, before=args.before.resolve() if args.before else None)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    slowest, verb = slowest_verb_p50(figures)
    load = figures["loadavg_before"]
    print(f"{os.cpu_count()} cores, load average {load[0]:.1f} before and {figures['loadavg_after'][0]:.1f} after")
    print(f"slowest operator verb p50: {slowest:.3f} s ({verb}; target {LIMIT:g} s)")
    body = common.target_rows(targets(figures)) + rows(figures)
    print(common.markdown_table(["figure", "value", "target", "verdict", "note"], body))
    return 0


if __name__ == "__main__":
    sys.exit(main())
