#!/usr/bin/env python3
"""Stream a model's reply into an agentstream agent through the producer API, exactly once.

Standard library only. The model is any OpenAI-compatible server (`--model-url`, streamed
Chat Completions). Each batch of the reply goes to `POST /v1/agents/{id}/produce` with
`Producer-Id`, `Producer-Epoch` and `Producer-Seq`; agentstream writes a batch once however
often it is sent (a retry is answered 204) and commits the producer's position with it.

Crash safety, in two small files in `--state-dir`:
  - `position.json`: the last batch the server acknowledged (epoch, seq, how much of the reply
    it covered, the run);
  - `pending.json`: the batch in flight, written *before* it is sent (its seq and how much of
    the reply it covers).
On start, the producer asks the server where it stands (`GET …/producers/{id}`): the server's
seq is either the acknowledged one or the pending one (sent, committed, answer lost), which
says how much of the reply is in the log. It then takes the next epoch (fencing off any
older process still running) at seq 0 and goes on from there: nothing lost, nothing doubled.
The reply is asked for again and the part already in the log skipped, which needs a
deterministic model (temperature 0 and a seed; the test's model is); with a model that is not,
keep its output in the pending file too and resend from there.

Usage:
  producer.py --server http://127.0.0.1:3000 --agent AGENT_ID --producer worker-1 \\
      --state-dir ./state --model-url http://127.0.0.1:8000/v1 --prompt "Tell me a story"
Environment: AGENTSTREAM_TOKEN (a token with the `produce` scope, or the operator's).
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
import uuid

# Characters of the reply sent per batch (one request per burst of tokens).
BATCH_CHARS_MAX = 64
# Tries per batch before giving up (a retry is safe: the server dedups by seq).
SEND_ATTEMPTS_MAX = 5


def request(method, url, body=None, headers=None, token=None):
    """(status, headers, parsed JSON or None)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    for name, value in (headers or {}).items():
        req.add_header(name, str(value))
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            raw = response.read()
            return response.status, response.headers, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, error.headers, json.loads(raw) if raw else None


def model_stream(model_url, prompt):
    """The reply's text pieces, from a streamed OpenAI-compatible Chat Completion."""
    body = {
        "model": "any",
        "stream": True,
        "temperature": 0,
        "seed": 7,
        "messages": [{"role": "user", "content": prompt}],
    }
    req = urllib.request.Request(
        model_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=60) as response:
        for line in response:
            line = line.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                return
            chunk = json.loads(data)
            for choice in chunk.get("choices", []):
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    yield piece


def read_json(path):
    try:
        with open(path) as file:
            return json.load(file)
    except FileNotFoundError:
        return None


def write_json(path, value):
    """Written whole or not at all (rename), and on disk before we go on (fsync)."""
    temporary = path + ".tmp"
    with open(temporary, "w") as file:
        json.dump(value, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


class Producer:
    def __init__(self, args):
        self.base = f"{args.server.rstrip('/')}/v1/agents/{args.agent}"
        self.producer = args.producer
        self.token = os.environ.get("AGENTSTREAM_TOKEN")
        self.position_file = os.path.join(args.state_dir, "position.json")
        self.pending_file = os.path.join(args.state_dir, "pending.json")
        self.epoch = 0
        self.seq = 0  # the next seq to send
        self.offset = 0  # characters of the reply in the log
        self.run_id = None
        self.run_open = False
        self.finished = False  # the run's end is in the log
        self.crash_after_send = args.crash_after_send

    def recover(self):
        """Where the log stands, from the server's position and our two files."""
        status, _, position = request(
            "GET", f"{self.base}/producers/{self.producer}", token=self.token
        )
        if status == 404 and (position or {}).get("error", {}).get("code") == "unknown_producer":
            return  # a fresh producer: epoch 0, seq 0, nothing in the log
        if status != 200:
            raise SystemExit(f"cannot read the producer's position: {status} {position}")
        acknowledged = read_json(self.position_file) or {}
        pending = read_json(self.pending_file) or {}
        server = (position["epoch"], position["seq"])
        if server == (pending.get("epoch"), pending.get("seq")):
            known = pending
        elif server == (acknowledged.get("epoch"), acknowledged.get("seq")):
            known = acknowledged
        else:
            raise SystemExit(f"the server is at {server}, which our state files do not know")
        self.offset = known["offset"]
        self.finished = known.get("final", False)
        self.run_id = position["run_id"]
        self.run_open = position["run_open"]
        if not self.run_open and not self.finished:
            # The run ended without us (cancelled, or our lease ran out while we were down):
            # the reply goes into a new run, whole.
            print("the run ended without this producer; the reply starts over in a new run",
                  flush=True)
            self.offset = 0
        # The next epoch fences off any older process of this producer still sending.
        self.epoch = position["epoch"] + 1
        self.seq = 0
        print(f"recovered: epoch {self.epoch}, {self.offset} characters in the log", flush=True)

    def send(self, events, offset, final=False):
        """One batch, retried until the server has it; the batch covers the reply up to `offset`
        (`final`: and ends the run)."""
        write_json(
            self.pending_file,
            {"epoch": self.epoch, "seq": self.seq, "offset": offset, "final": final},
        )
        headers = {
            "Producer-Id": self.producer,
            "Producer-Epoch": self.epoch,
            "Producer-Seq": self.seq,
        }
        for _ in range(SEND_ATTEMPTS_MAX):
            try:
                status, _, body = request(
                    "POST", f"{self.base}/produce", events, headers, self.token
                )
            except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
                print(f"retrying seq {self.seq}: {error}", file=sys.stderr, flush=True)
                continue
            if status in (200, 204):
                break
            raise SystemExit(f"batch {self.seq} refused: {status} {body}")
        else:
            raise SystemExit(f"batch {self.seq} not acknowledged after {SEND_ATTEMPTS_MAX} tries")
        if self.crash_after_send == self.seq:
            # Fault injection (tests): die with the batch committed and its answer unrecorded,
            # as a crash between the server's answer and our write would.
            os._exit(9)
        if status == 200:
            self.run_id = body["run_id"]
            self.run_open = body["run_open"]
        write_json(
            self.position_file,
            {"epoch": self.epoch, "seq": self.seq, "offset": offset, "final": final,
             "run_id": self.run_id},
        )
        print(f"acked seq {self.seq} epoch {self.epoch} offset {offset}", flush=True)
        self.seq += 1
        self.offset = offset

    def run(self, model_url, prompt):
        self.recover()
        if self.finished:
            print(f"done already: run {self.run_id}", flush=True)
            return
        message_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.producer}/{prompt}/reply"))
        opening = []
        if not self.run_open:
            user_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.producer}/{prompt}/user"))
            opening = [
                {"kind": "run_started", "metadata": {"model": "openai-compatible", "lease_ms": 10000}},
                {"kind": "user", "message_id": user_id, "content": {"text": prompt}},
            ]
        seen = 0  # characters of the reply read from the model
        buffered = ""
        for piece in model_stream(model_url, prompt):
            # The part of the reply already in the log is skipped (the model is deterministic).
            skip = max(0, min(len(piece), self.offset - seen))
            seen += len(piece)
            buffered += piece[skip:]
            if len(buffered) >= BATCH_CHARS_MAX:
                delta = {"kind": "text", "message_id": message_id,
                         "delta": buffered, "delta_action": "append"}
                self.send(opening + [delta], seen)
                opening, buffered = [], ""
        closing = [{"kind": "run_completed", "content": {"stop_reason": "end_turn"}}]
        if buffered:
            closing.insert(0, {"kind": "text", "message_id": message_id,
                               "delta": buffered, "delta_action": "append"})
        self.send(opening + closing, seen, final=True)
        print(f"done: run {self.run_id}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--producer", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--crash-after-send", type=int, default=None,
                        help="fault injection: exit right after the server answers this seq")
    args = parser.parse_args()
    os.makedirs(args.state_dir, exist_ok=True)
    Producer(args).run(args.model_url, args.prompt)


if __name__ == "__main__":
    main()
