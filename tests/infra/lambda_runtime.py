"""A function binary run as Lambda runs it: the Runtime API on 127.0.0.1 hands it one event at a
time, with the environment Lambda gives a function (its configured variables, the role's session
credentials, the `AWS_LAMBDA_*` variables).

The API is Lambda's documented one
(https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html): `GET
/2018-06-01/runtime/invocation/next` answers an event with `Lambda-Runtime-Aws-Request-Id` and
`Lambda-Runtime-Deadline-Ms`; the function posts `.../invocation/{id}/response` or `.../error`,
or `/runtime/init/error` when its init phase fails. The variables are those of "Defined runtime
environment variables"
(https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime).
"""
import json
import os
import queue
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Function:
    """`bin` started with `env` and the Runtime API's address; `invoke(event)` hands it one event
    and returns ("response" | "error", body)."""

    def __init__(self, binary, env, function_arn, deadline_secs=120):
        self.events = queue.Queue()
        self.answers = queue.Queue()
        self.deadline_secs = deadline_secs
        outer = self

        class Api(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if not self.path.endswith("/runtime/invocation/next"):
                    return self.reply(404, {})
                request_id, event = outer.events.get()
                if request_id is None:  # shutting down: Lambda would freeze the process here
                    return self.reply(410, {})
                deadline = int(time.time() * 1000) + outer.deadline_secs * 1000
                self.reply(200, event, {
                    "Lambda-Runtime-Aws-Request-Id": request_id,
                    "Lambda-Runtime-Deadline-Ms": str(deadline),
                    "Lambda-Runtime-Invoked-Function-Arn": function_arn,
                    "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000",
                })

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                parts = self.path.strip("/").split("/")
                try:
                    value = json.loads(body or b"null")
                except ValueError:
                    value = body.decode(errors="replace")
                if parts[1:] == ["runtime", "init", "error"]:
                    outer.answers.put(("init-error", value))
                elif len(parts) == 5 and parts[4] in ("response", "error"):
                    outer.answers.put((parts[4], value))
                self.reply(202, {})

            def reply(self, status, body, headers=None):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # the function's connection cut when it is stopped: nothing to report

        self.server = Server(("127.0.0.1", 0), Api)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        full = dict(env)
        full["AWS_LAMBDA_RUNTIME_API"] = f"127.0.0.1:{self.server.server_address[1]}"
        full.setdefault("PATH", os.environ.get("PATH", ""))
        self.output = []
        self.proc = subprocess.Popen(
            [str(binary)], env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._drain, daemon=True).start()
        self.count = 0

    def _drain(self):
        for line in self.proc.stdout:
            self.output.append(line.rstrip("\n"))

    def invoke(self, event, within=90):
        self.count += 1
        self.events.put((f"deployed-{self.count}", event))
        try:
            return self.answers.get(timeout=within)
        except queue.Empty:
            raise AssertionError(f"no answer within {within}s; the function printed:\n" + self.log()) from None

    def log(self):
        return "\n".join(self.output[-200:])

    def stop(self):
        self.events.put((None, None))
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.server.shutdown()
