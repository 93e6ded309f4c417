"""Fault switches for the moto test bed: make the next N calls of one AWS operation fail the way
AWS fails (5xx, throttling, a hang), with each protocol's own error shape, so a test can show
that a client retries or fails cleanly.

Control routes (plain HTTP, no signature):
- POST /_cellbridge/faults {"service": "sts"|"eks"|"secretsmanager"|"s3"|"sqs"|...,
  "operation": "GetCallerIdentity" (X-Amz-Target suffix or Action, a REST operation name of
  REST_OPS, or a regex on "METHOD /raw/path"), "kind": "5xx"|"throttle"|"timeout"|"denied", "count": 1,
  "skip": 0, "sleep": 30, "access_key": only calls signed with this key id, "body_contains":
  only requests whose body holds this text, "land": false, "tag": a name for the test's own use}
  A "timeout" sleeps `sleep` seconds and then answers 503; with "land": true the call is served
  for real first and its answer held back `sleep` seconds (the write happened, the client that
  gave up never learns it: a response lost on the way back).
- GET /_cellbridge/faults: the switches with their hit counts; DELETE: remove them all
  (`?tag=T`: only those tagged T, so that tests sharing one moto clear only their own).
- GET /_cellbridge/calls?access_key=K: the AWS calls seen so far (the last 20000), each
  {service, operation, line, access_key, presigned}, optionally only those signed with key K;
  DELETE: forget them. A test learns from it which calls a run makes.
"""
import collections
import io
import json
import re
import threading
import time
import urllib.parse

LOCK = threading.Lock()
FAULTS = []
CALLS = collections.deque(maxlen=20000)

# protocol per service (what the SDKs speak today)
PROTOCOL = {"sts": "query", "iam": "query", "s3": "rest-xml", "eks": "rest-json", "secretsmanager": "json",
            "sqs": "json", "events": "json", "lambda": "rest-json", "kms": "json", "dynamodb": "json"}
CODES = {
    ("query", "5xx"): (503, "ServiceUnavailable"), ("query", "throttle"): (400, "Throttling"),
    ("rest-xml", "5xx"): (503, "ServiceUnavailable"), ("rest-xml", "throttle"): (503, "SlowDown"),
    ("rest-json", "5xx"): (500, "ServerException"), ("rest-json", "throttle"): (429, "ThrottlingException"),
    ("json", "5xx"): (500, "InternalServiceError"), ("json", "throttle"): (400, "ThrottlingException"),
    # A refusal: what a missing IAM grant gets. S3: "AccessDenied" 403
    # (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html#ErrorCodeList); STS
    # (query): "AccessDenied" 403 (API_AssumeRole, Errors); EKS (rest-json):
    # "AccessDeniedException" 403 (https://docs.aws.amazon.com/eks/latest/APIReference/CommonErrors.html);
    # the JSON protocols (Secrets Manager, SQS): "AccessDeniedException" 400, as their common
    # errors list it (https://docs.aws.amazon.com/secretsmanager/latest/apireference/CommonErrors.html).
    ("query", "denied"): (403, "AccessDenied"), ("rest-xml", "denied"): (403, "AccessDenied"),
    ("rest-json", "denied"): (403, "AccessDeniedException"), ("json", "denied"): (400, "AccessDeniedException"),
}


# REST operations by name, for services whose operation is only in the method and path.
REST_OPS = {
    "DescribeCluster": r"^GET /clusters/[^/]+$",
    "CreateCluster": r"^POST /clusters$",
    "ListAccessEntries": r"^GET /clusters/[^/]+/access-entries$",
    "CreateAccessEntry": r"^POST /clusters/[^/]+/access-entries$",
    "DescribeAccessEntry": r"^GET /clusters/[^/]+/access-entries/[^/]+$",
    "DeleteAccessEntry": r"^DELETE /clusters/[^/]+/access-entries/[^/]+$",
    "AssociateAccessPolicy": r"^POST /clusters/[^/]+/access-entries/[^/]+/access-policies$",
    "ListAssociatedAccessPolicies": r"^GET /clusters/[^/]+/access-entries/[^/]+/access-policies$",
    # POST /tags/{resourceArn}, the ARN URL-encoded into one segment
    # (https://docs.aws.amazon.com/eks/latest/APIReference/API_TagResource.html).
    "TagResource": r"^POST /tags/[^/]+$",
    "GetObject": r"^GET /[^/]+/.+",
    "ListObjectVersions": r"^GET /[^/]+/?$",
}
REST_SERVICE = {"GetObject": "s3", "ListObjectVersions": "s3"}  # the others are EKS's


def request_line(environ):
    # The raw path keeps an escaped ARN in one segment.
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or urllib.parse.quote(environ.get("PATH_INFO", ""))
    return f"{environ.get('REQUEST_METHOD')} {urllib.parse.urlsplit(raw).path}"


def service_of(environ):
    auth = environ.get("HTTP_AUTHORIZATION", "")
    m = re.search(r"Credential=[^/]+/\d{8}/[^/]+/([^/]+)/aws4_request", auth)
    if m:
        return m.group(1)
    q = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    cred = (q.get("X-Amz-Credential") or [""])[0]
    parts = cred.split("/")
    return parts[3] if len(parts) == 5 else None


def access_key_of(environ):
    auth = environ.get("HTTP_AUTHORIZATION", "")
    m = re.search(r"Credential=([^/]+)/", auth)
    if m:
        return m.group(1)
    q = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    return (q.get("X-Amz-Credential") or [""])[0].split("/")[0] or None


def body_of(environ):
    if "cellbridge.body" not in environ:
        n = int(environ.get("CONTENT_LENGTH") or 0)
        environ["cellbridge.body"] = environ["wsgi.input"].read(n) if n else b""
    raw = environ["cellbridge.body"]
    environ["wsgi.input"] = io.BytesIO(raw)  # the real handler reads it again
    return raw


def operation_names(environ):
    names = []
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        names.append(target.split(".")[-1])
    q = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    if q.get("Action"):
        names.append(q["Action"][0])
    ctype = environ.get("CONTENT_TYPE", "")
    if environ.get("REQUEST_METHOD") == "POST" and "x-www-form-urlencoded" in ctype:
        form = urllib.parse.parse_qs(body_of(environ).decode(errors="replace"))
        if form.get("Action"):
            names.append(form["Action"][0])
    return names


def error_response(start_response, protocol, status, code):
    msg = f"injected fault: {code}"
    if protocol == "query":
        body = (f'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Receiver</Type>'
                f"<Code>{code}</Code><Message>{msg}</Message></Error><RequestId>fault</RequestId></ErrorResponse>").encode()
        headers = [("Content-Type", "text/xml")]
    elif protocol == "rest-xml":
        body = f"<Error><Code>{code}</Code><Message>{msg}</Message><RequestId>fault</RequestId></Error>".encode()
        headers = [("Content-Type", "application/xml")]
    elif protocol == "rest-json":
        body = json.dumps({"message": msg}).encode()
        headers = [("Content-Type", "application/json"), ("x-amzn-ErrorType", code)]
    else:
        body = json.dumps({"__type": code, "message": msg}).encode()
        headers = [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-ErrorType", code)]
    headers.append(("Content-Length", str(len(body))))
    start_response(f"{status} Fault", headers)
    return [body]


class Faults:
    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/_cellbridge/faults":
            return self.control(environ, start_response)
        if path == "/_cellbridge/calls":
            return self.calls(environ, start_response)
        self.record(environ)
        if FAULTS:
            f = self.match(environ)
            if f is not None:
                protocol = PROTOCOL.get(f["service"], "json")
                if f["kind"] == "timeout":
                    if f.get("land"):
                        return self.landed(environ, start_response, f.get("sleep", 30))
                    time.sleep(f.get("sleep", 30))
                    status, code = CODES[(protocol, "5xx")]
                else:
                    status, code = CODES[(protocol, f["kind"])]
                return error_response(start_response, protocol, status, code)
        return self.app(environ, start_response)

    def landed(self, environ, start_response, sleep):
        """Serves the call, then holds the answer back: the work is done, the client that gives
        up first never learns it."""
        captured = {}

        def sr(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers

        body = b"".join(self.app(environ, sr))
        time.sleep(sleep)
        start_response(captured["status"], captured["headers"])
        return [body]

    def record(self, environ):
        service = service_of(environ)
        if service is None:
            return
        line = request_line(environ)
        names = operation_names(environ)
        if not names:
            names = [op for op, pattern in REST_OPS.items()
                     if REST_SERVICE.get(op, "eks") == service and re.search(pattern, line)] or [line]
        with LOCK:
            CALLS.append({"service": service, "operation": names[0], "line": line,
                          "access_key": access_key_of(environ),
                          "presigned": not environ.get("HTTP_AUTHORIZATION")})

    def calls(self, environ, start_response):
        with LOCK:
            if environ.get("REQUEST_METHOD") == "DELETE":
                CALLS.clear()
                out = []
            else:
                key = (urllib.parse.parse_qs(environ.get("QUERY_STRING", "")).get("access_key") or [None])[0]
                out = [c for c in CALLS if key is None or c["access_key"] == key]
            body = json.dumps(out).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def match(self, environ):
        service = service_of(environ)
        if service is None:
            return None
        ops = None
        with LOCK:
            for f in FAULTS:
                if f["service"] != service or f["count"] <= 0:
                    continue
                # Scoping, so that tests sharing one moto do not hit each other's faults.
                if f.get("access_key") and access_key_of(environ) != f["access_key"]:
                    continue
                if f.get("body_contains") and f["body_contains"].encode() not in body_of(environ):
                    continue
                if f.get("operation"):
                    if ops is None:
                        ops = operation_names(environ)
                    line = request_line(environ)
                    pattern = REST_OPS.get(f["operation"], f["operation"])
                    if f["operation"] not in ops and not re.search(pattern, line):
                        continue
                if f["skip"] > 0:
                    f["skip"] -= 1
                    continue
                f["count"] -= 1
                f["hits"] += 1
                return dict(f)
        return None

    def control(self, environ, start_response):
        method = environ.get("REQUEST_METHOD")
        with LOCK:
            if method == "DELETE":
                tag = (urllib.parse.parse_qs(environ.get("QUERY_STRING", "")).get("tag") or [None])[0]
                FAULTS[:] = [f for f in FAULTS if tag is not None and f.get("tag") != tag]
                out = {}
            elif method == "POST":
                n = int(environ.get("CONTENT_LENGTH") or 0)
                req = json.loads(environ["wsgi.input"].read(n) or b"{}")
                kind = req.get("kind", "5xx")
                if kind not in ("5xx", "throttle", "timeout", "denied") or not req.get("service"):
                    body = json.dumps({"error": "need service and kind 5xx|throttle|timeout|denied"}).encode()
                    start_response("400 Bad Request", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
                    return [body]
                out = {"service": req["service"], "operation": req.get("operation"), "kind": kind,
                       "count": int(req.get("count", 1)), "skip": int(req.get("skip", 0)),
                       "sleep": float(req.get("sleep", 30)), "hits": 0,
                       "access_key": req.get("access_key"), "body_contains": req.get("body_contains"),
                       "land": bool(req.get("land", False)), "tag": req.get("tag")}
                FAULTS.append(out)
            else:
                out = FAULTS
            body = json.dumps(out).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def install():
    """Wraps moto's WSGI application (outermost, so faults also hit the EKS extension)."""
    from moto.moto_server import threaded_moto_server as tms

    inner = tms.DomainDispatcherApplication

    def factory(*args, **kwargs):
        return Faults(inner(*args, **kwargs))

    tms.DomainDispatcherApplication = factory
