"""What moto's EKS lacks for the bootstrap tests, added in front of moto as WSGI middleware.

- Access entries: CreateAccessEntry, DescribeAccessEntry, ListAccessEntries, DeleteAccessEntry,
  AssociateAccessPolicy, ListAssociatedAccessPolicies, DisassociateAccessPolicy, with the real
  REST paths, JSON shapes and error codes (ResourceNotFoundException 404,
  ResourceInUseException 409, InvalidRequestException / InvalidParameterException 400).
- A real certificate authority on every cluster (moto returns random letters): a PEM CA made
  at start, or the one a test sets for a cluster (the fake Kubernetes API server's).
- `accessConfig.authenticationMode` (from CreateCluster's `accessConfig`, default
  API_AND_CONFIG_MAP), and a cluster status that is CREATING until a chosen time.

Control routes (plain HTTP, no signature), for tests:
- POST /_cellbridge/eks/clusters/<name>  {"region", "endpoint", "ca_pem", "authentication_mode",
  "status", "active_after"}: override what DescribeCluster says about a cluster;
- GET /_cellbridge/eks/log: every access-entry operation so far [{op, account, region, cluster, principal}];
- GET /_cellbridge/eks/entries/<name>?region=&account=: a cluster's access entries (every
  account's cluster of that name when no account is given, as kube_fake.py asks: it matches the
  caller's account itself);
- DELETE /_cellbridge/eks/log: clear it.
- POST /_cellbridge/eks/entries/<name> {"region", "account", "principal", "age_secs"}: the entry
  was created `age_secs` ago (`createdAt`, as a run killed that long ago would have left it).

Access entries belong to the cluster of the caller's account, as moto's own EKS resources do:
moto attributes a request to the account its access key belongs to, and STS AssumeRole of a role
in another account mints a key of that account (https://docs.getmoto.org/en/latest/docs/multi_account.html;
moto/sts/models.py `assume_role`: "The ARN can point to another account, providing an
opportunity to switch accounts"). Two accounts' clusters of one name are two clusters.
"""
import base64
import datetime
import json
import re
import threading
import time
import urllib.parse

LOCK = threading.RLock()
OVERRIDES = {}  # (region, cluster) -> dict
ENTRIES = {}  # (account, region, cluster) -> {principal: entry}
LOG = []
DEFAULT_CA_PEM = None

ACCESS_RE = re.compile(r"^/clusters/([^/]+)/access-entries(?:/([^/]+)(/access-policies(?:/([^/]+))?)?)?/?$")
CLUSTER_RE = re.compile(r"^/clusters/([^/]+)/?$")
PRINCIPAL_RE = re.compile(r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:(role|user|assumed-role)/.+")
POLICY_RE = re.compile(r"^arn:aws[a-z-]*:eks::aws:cluster-access-policy/[A-Za-z]+$")


def make_ca_pem():
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def region_of(environ):
    auth = environ.get("HTTP_AUTHORIZATION", "")
    m = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/", auth)
    return m.group(1) if m else "us-east-1"


def request_account(environ):
    """The account moto attributes the request to (moto.core.responses `get_current_account`)."""
    if environ.get("HTTP_X_MOTO_ACCOUNT_ID"):
        return environ["HTTP_X_MOTO_ACCOUNT_ID"]
    from moto.iam.models import get_account_id_from

    m = re.search(r"Credential=([^/]+)/", environ.get("HTTP_AUTHORIZATION", ""))
    return get_account_id_from(m.group(1) if m else "")


def account_of(principal):
    return principal.split(":")[4]


def raw_path(environ):
    # PATH_INFO is percent-decoded, which turns the `/` of an escaped ARN into a separator.
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        return urllib.parse.urlsplit(raw).path
    return urllib.parse.quote(environ.get("PATH_INFO", ""))


def reply(start_response, status, body, error_type=None):
    data = json.dumps(body).encode()
    reasons = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict"}
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    if error_type:
        headers.append(("x-amzn-ErrorType", error_type))
    start_response(f"{status} {reasons.get(status, 'Error')}", headers)
    return [data]


def error(start_response, status, error_type, message, **extra):
    return reply(start_response, status, {"message": message, **extra}, error_type)


def read_json(environ):
    n = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(n) if n else b""
    return json.loads(body) if body else {}


def presigned_sts(environ):
    """A presigned STS GetCallerIdentity URL (an EKS token, replayed as aws-iam-authenticator
    does) carries its signature in the query; moto routes by the Authorization header, so the
    query's credential is restated there for moto to find STS and the caller."""
    q = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    one = lambda k: (q.get(k) or [""])[0]
    cred = one("X-Amz-Credential")
    if one("Action") != "GetCallerIdentity" or "/sts/aws4_request" not in cred:
        return
    environ["HTTP_AUTHORIZATION"] = (f"AWS4-HMAC-SHA256 Credential={cred}, SignedHeaders={one('X-Amz-SignedHeaders')}, "
                                     f"Signature={one('X-Amz-Signature')}")
    if one("X-Amz-Security-Token"):
        environ["HTTP_X_AMZ_SECURITY_TOKEN"] = one("X-Amz-Security-Token")
    if one("X-Amz-Date"):
        environ["HTTP_X_AMZ_DATE"] = one("X-Amz-Date")


def find_cluster(account, region, name):
    from moto.eks.models import eks_backends

    try:
        return eks_backends[account][region].clusters.get(name)
    except Exception:
        return None


def auth_mode(region, name):
    return OVERRIDES.get((region, name), {}).get("authentication_mode", "API_AND_CONFIG_MAP")


class EksExtension:
    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path.startswith("/_cellbridge/eks/"):
            return self.control(environ, start_response, method, path)
        if method == "GET" and not environ.get("HTTP_AUTHORIZATION"):
            presigned_sts(environ)
        is_eks = "/eks/aws4_request" in environ.get("HTTP_AUTHORIZATION", "")
        if is_eks:
            rpath = raw_path(environ)
            m = ACCESS_RE.match(rpath)
            if m:
                with LOCK:
                    return self.access(environ, start_response, method, *[urllib.parse.unquote(g) if g else g for g in m.groups()])
            if CLUSTER_RE.match(path) and method == "GET":
                return self.rewrite_cluster(environ, start_response, CLUSTER_RE.match(path).group(1))
            if path.rstrip("/") == "/clusters" and method == "POST":
                return self.create_cluster(environ, start_response)
        return self.app(environ, start_response)

    # -- clusters -------------------------------------------------------------------------
    def call_inner(self, environ):
        captured = {}

        def sr(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers

        body = b"".join(self.app(environ, sr))
        return captured["status"], captured["headers"], body

    def patch_cluster(self, region, cluster):
        name = cluster.get("name")
        ov = OVERRIDES.get((region, name), {})
        ca = ov.get("ca_pem") or DEFAULT_CA_PEM
        cluster["certificateAuthority"] = {"data": base64.b64encode(ca.encode()).decode()}
        if ov.get("endpoint"):
            cluster["endpoint"] = ov["endpoint"]
        cluster["accessConfig"] = {"authenticationMode": auth_mode(region, name),
                                   "bootstrapClusterCreatorAdminPermissions": True}
        status = ov.get("status")
        if status:
            until = ov.get("active_at")
            if until is not None and time.time() >= until:
                status = "ACTIVE"
            cluster["status"] = status
        return cluster

    def rewrite_cluster(self, environ, start_response, name):
        status, headers, body = self.call_inner(environ)
        if status.startswith("200"):
            doc = json.loads(body)
            with LOCK:
                self.patch_cluster(region_of(environ), doc.get("cluster", {}))
            body = json.dumps(doc).encode()
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            headers.append(("Content-Length", str(len(body))))
        start_response(status, headers)
        return [body]

    def create_cluster(self, environ, start_response):
        n = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(n) if n else b""
        req = json.loads(raw) if raw else {}
        mode = (req.get("accessConfig") or {}).get("authenticationMode")
        if mode and mode not in ("API", "API_AND_CONFIG_MAP", "CONFIG_MAP"):
            return error(start_response, 400, "InvalidParameterException", f"Unsupported authentication mode: {mode}")
        import io
        environ["wsgi.input"] = io.BytesIO(raw)
        environ["CONTENT_LENGTH"] = str(len(raw))
        status, headers, body = self.call_inner(environ)
        if status.startswith("200"):
            region = region_of(environ)
            with LOCK:
                if mode:
                    OVERRIDES.setdefault((region, req["name"]), {})["authentication_mode"] = mode
                doc = json.loads(body)
                self.patch_cluster(region, doc.get("cluster", {}))
            body = json.dumps(doc).encode()
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            headers.append(("Content-Length", str(len(body))))
        start_response(status, headers)
        return [body]

    # -- access entries -------------------------------------------------------------------
    def access(self, environ, start_response, method, cluster_name, principal, policies, policy):
        region = region_of(environ)
        account = request_account(environ)
        cluster = find_cluster(account, region, cluster_name)
        if cluster is None:
            return error(start_response, 404, "ResourceNotFoundException", f"No cluster found for name: {cluster_name}.",
                         clusterName=cluster_name)
        if auth_mode(region, cluster_name) == "CONFIG_MAP":
            return error(start_response, 400, "InvalidRequestException",
                         "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation.",
                         clusterName=cluster_name)
        entries = ENTRIES.setdefault((account, region, cluster_name), {})
        now = time.time()

        def log(op, p):
            LOG.append({"op": op, "account": account, "region": region, "cluster": cluster_name, "principal": p, "t": now})

        def not_found(p):
            return error(start_response, 404, "ResourceNotFoundException",
                         f"The specified access entry resource is not found for principal {p}.",
                         clusterName=cluster_name, principalArn=p)

        def shape(e):
            return {k: v for k, v in e.items() if k != "policies"}

        if principal is None:
            if method == "POST":
                req = read_json(environ)
                p = req.get("principalArn", "")
                if not PRINCIPAL_RE.match(p) or ":assumed-role/" in p:
                    return error(start_response, 400, "InvalidParameterException",
                                 f"The principalArn parameter format is not valid: {p}", clusterName=cluster_name)
                if p in entries:
                    return error(start_response, 409, "ResourceInUseException",
                                 f"The specified access entry resource is already in use on this cluster.",
                                 clusterName=cluster_name, principalArn=p)
                kind = req.get("type", "STANDARD")
                if kind not in ("STANDARD", "EC2_LINUX", "EC2_WINDOWS", "FARGATE_LINUX", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX"):
                    return error(start_response, 400, "InvalidParameterException", f"Unsupported access entry type: {kind}")
                name = p.split("/")[-1]
                entry = {
                    "clusterName": cluster_name,
                    "principalArn": p,
                    "kubernetesGroups": req.get("kubernetesGroups") or [],
                    "accessEntryArn": f"arn:aws:eks:{region}:{account_of(p)}:access-entry/{cluster_name}/role/{account_of(p)}/{name}/{int(now)}",
                    "createdAt": now,
                    "modifiedAt": now,
                    "tags": req.get("tags") or {},
                    "username": req.get("username") or p,
                    "type": kind,
                    "policies": {},
                }
                entries[p] = entry
                log("CreateAccessEntry", p)
                return reply(start_response, 200, {"accessEntry": shape(entry)})
            if method == "GET":
                return reply(start_response, 200, {"accessEntries": sorted(entries)})
            return error(start_response, 400, "InvalidRequestException", "unsupported method")
        entry = entries.get(principal)
        if entry is None:
            return not_found(principal)
        if not policies:
            if method == "GET":
                log("DescribeAccessEntry", principal)
                return reply(start_response, 200, {"accessEntry": shape(entry)})
            if method == "DELETE":
                del entries[principal]
                log("DeleteAccessEntry", principal)
                return reply(start_response, 200, {})
            return error(start_response, 400, "InvalidRequestException", "unsupported method")
        if policy is None:
            if method == "POST":
                req = read_json(environ)
                parn = req.get("policyArn", "")
                scope = req.get("accessScope") or {}
                if not POLICY_RE.match(parn):
                    return error(start_response, 400, "InvalidParameterException", f"The policyArn parameter format is not valid: {parn}")
                if scope.get("type") not in ("cluster", "namespace"):
                    return error(start_response, 400, "InvalidParameterException", "accessScope.type must be cluster or namespace")
                assoc = {"policyArn": parn, "accessScope": {"type": scope["type"], "namespaces": scope.get("namespaces") or []},
                         "associatedAt": entry["policies"].get(parn, {}).get("associatedAt", now), "modifiedAt": now}
                entry["policies"][parn] = assoc
                log("AssociateAccessPolicy", principal)
                return reply(start_response, 200, {"clusterName": cluster_name, "principalArn": principal,
                                                   "associatedAccessPolicy": assoc})
            if method == "GET":
                return reply(start_response, 200, {"clusterName": cluster_name, "principalArn": principal,
                                                   "associatedAccessPolicies": list(entry["policies"].values())})
            return error(start_response, 400, "InvalidRequestException", "unsupported method")
        if method == "DELETE":
            if policy not in entry["policies"]:
                return error(start_response, 404, "ResourceNotFoundException", f"The policy {policy} is not associated.")
            del entry["policies"][policy]
            log("DisassociateAccessPolicy", principal)
            return reply(start_response, 200, {})
        return error(start_response, 400, "InvalidRequestException", "unsupported method")

    # -- control --------------------------------------------------------------------------
    def control(self, environ, start_response, method, path):
        with LOCK:
            if path == "/_cellbridge/eks/log":
                if method == "DELETE":
                    LOG.clear()
                    return reply(start_response, 200, {})
                return reply(start_response, 200, LOG)
            m = re.match(r"^/_cellbridge/eks/clusters/([^/]+)$", path)
            if m and method == "POST":
                req = read_json(environ)
                key = (req.get("region", "us-east-1"), m.group(1))
                ov = OVERRIDES.setdefault(key, {})
                for k in ("endpoint", "ca_pem", "authentication_mode", "status"):
                    if k in req:
                        ov[k] = req[k]
                if "active_after" in req:
                    ov["active_at"] = time.time() + float(req["active_after"])
                    ov.setdefault("status", "CREATING")
                return reply(start_response, 200, {"ok": True})
            m = re.match(r"^/_cellbridge/eks/entries/([^/]+)$", path)
            if m and method == "GET":
                q = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
                region = q.get("region", ["us-east-1"])[0]
                account = q.get("account", [None])[0]
                es = [e for (a, r, c), byp in ENTRIES.items() if r == region and c == m.group(1)
                      and account in (None, a) for e in byp.values()]
                return reply(start_response, 200, [dict(e) for e in es])
            if m and method == "POST":
                req = read_json(environ)
                entry = ENTRIES.get((req["account"], req["region"], m.group(1)), {}).get(req["principal"])
                if entry is None:
                    return error(start_response, 404, "NotFound", "no such access entry")
                entry["createdAt"] = time.time() - float(req["age_secs"])
                return reply(start_response, 200, {"ok": True})
        return error(start_response, 404, "NotFound", "no such control route")


def install():
    """Wraps moto's WSGI application; call before ThreadedMotoServer.start()."""
    global DEFAULT_CA_PEM
    DEFAULT_CA_PEM = make_ca_pem()
    from moto.moto_server import threaded_moto_server as tms

    inner = tms.DomainDispatcherApplication

    def factory(*args, **kwargs):
        return EksExtension(inner(*args, **kwargs))

    tms.DomainDispatcherApplication = factory
