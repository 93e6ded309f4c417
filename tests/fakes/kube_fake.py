"""A stateful fake of the Kubernetes API server, for the bootstrap tests and bench.

What it serves, with the real API's shapes and status codes:
- discovery: /version, /api, /apis, /api/v1, /apis/<group>/<version>;
- get, list, create (POST), replace (PUT), delete, merge patch and server-side apply
  (PATCH application/apply-patch+yaml, `fieldManager` required, `force` honoured, conflicts
  between managers answered 409) of any kind, namespaced or cluster-scoped;
- namespaces (a namespaced create in a missing namespace is a 404), Secrets (`stringData`
  folded into `data`), the status subresource (main-resource writes keep the status);
- CustomResourceDefinitions that become Established after `--crd-delay` seconds and only then
  add their kinds to discovery: a custom resource sent before that gets a 404, as from a real
  API server;
- a custom resource's status stored as the API server stores it: pruned by the structural schema
  of the CRD version it is written through, a field the schema does not declare dropped, a node
  marked `x-kubernetes-preserve-unknown-fields: true` kept whole
  (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#field-pruning),
  whoever writes it (a client through the status subresource, or the fake's own controllers);
- bearer-token authentication: the `--token` given, or an EKS token (`k8s-aws-v1.` + base64url
  of a presigned STS GetCallerIdentity URL with X-Amz-Signature and `x-k8s-aws-id` among the
  signed headers, expiring within 15 minutes). With `--eks-auth MOTO_URL,REGION,CLUSTER` the
  token is also replayed against STS (moto) and the caller must have an access entry with a
  policy on that cluster (401 without an entry, 403 without a policy), as on EKS.

Control API under /_fake/ (no authentication): faults (5xx, 429, 409, sleeps) at chosen
requests, the request log, stored objects (`?brief=1`: names only), GitRepository readiness
(`/_fake/auto-ready`: source-controller's answer to each reconcile, a write of the GitRepository
or a new `reconcile.fluxcd.io/requestedAt`; with `accepts`, the answer is the Secret it reads),
what the cluster's own controllers write (`/_fake/status`: an object's status, as its controller
writes it through the status subresource; `/_fake/object`: an object they create, such as a
ReplicaSet's Pod, status included; `/_fake/nodes`: the Nodes that joined), reset.

Lists honour `limit` and `continue`, with `metadata.remainingItemCount` while items remain, as
the API server pages them (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks).

Run: kube_fake.py --port 0 [--tls] [--ca-out FILE] [--token T] [--crd-delay S] [--discovery-lag S]
Prints `CA=<pem path>` (with --tls), `CONTROL_PORT=<n>` (plain HTTP, the control API) and then
`PORT=<n>`; lives until stdin closes.
"""
import argparse
import base64
import copy
import hashlib
import datetime
import json
import os
import re
import ssl
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import leak_registry  # noqa: E402  (secrets this fake mints, for tests/leak_check.py)

try:
    import yaml  # PyYAML ships with moto[server]; JSON bodies never need it
except ImportError:  # pragma: no cover
    yaml = None

# (group, version, kind, plural, namespaced, has_status)
BUILTINS = [
    ("", "v1", "Namespace", "namespaces", False, True),
    ("", "v1", "Node", "nodes", False, True),
    ("", "v1", "Secret", "secrets", True, False),
    ("", "v1", "ConfigMap", "configmaps", True, False),
    ("", "v1", "ServiceAccount", "serviceaccounts", True, False),
    ("", "v1", "Service", "services", True, True),
    ("", "v1", "ResourceQuota", "resourcequotas", True, True),
    ("", "v1", "LimitRange", "limitranges", True, False),
    ("", "v1", "Pod", "pods", True, True),
    ("", "v1", "Event", "events", True, False),
    ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, True),
    ("apps", "v1", "Deployment", "deployments", True, True),
    ("apps", "v1", "StatefulSet", "statefulsets", True, True),
    ("apps", "v1", "DaemonSet", "daemonsets", True, True),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False, False),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False, False),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", True, False),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True, False),
    ("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, False),
    ("networking.k8s.io", "v1", "Ingress", "ingresses", True, True),
    ("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, True),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False, True),
    ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", False, False),
    ("coordination.k8s.io", "v1", "Lease", "leases", True, False),
]

SHORT = {"namespaces": ["ns"], "deployments": ["deploy"], "customresourcedefinitions": ["crd", "crds"],
         "services": ["svc"], "serviceaccounts": ["sa"], "configmaps": ["cm"], "networkpolicies": ["netpol"],
         "resourcequotas": ["quota"], "pods": ["po"], "statefulsets": ["sts"], "daemonsets": ["ds"],
         "persistentvolumeclaims": ["pvc"], "ingresses": ["ing"], "poddisruptionbudgets": ["pdb"], "limitranges": ["limits"],
         "events": ["ev"], "nodes": ["no"]}

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = details or {}
        self.headers = headers or {}

    def body(self):
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        }


def not_found(resource, name, group=""):
    qual = f"{resource}.{group}" if group else resource
    return ApiError(404, "NotFound", f'{qual} "{name}" not found', {"name": name, "group": group, "kind": resource})


class Resource:
    def __init__(self, group, version, kind, plural, namespaced, has_status, singular=None, crd=None, short=None):
        self.group, self.version, self.kind, self.plural = group, version, kind, plural
        self.short = short if short is not None else SHORT.get(plural, [])
        self.namespaced, self.has_status = namespaced, has_status
        self.singular = singular or kind.lower()
        self.crd = crd  # name of the defining CRD, None for built-ins

    def api_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version


def flatten(obj, prefix=()):
    """Leaf paths of a JSON value; a list is one leaf (the fake has no associative lists)."""
    if isinstance(obj, dict) and obj:
        out = {}
        for k, v in obj.items():
            out.update(flatten(v, prefix + (k,)))
        return out
    return {prefix: obj}


def get_path(obj, path):
    for p in path:
        if not isinstance(obj, dict) or p not in obj:
            return None
        obj = obj[p]
    return obj


def deep_merge(base, patch, delete_nulls=False):
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(base)
    for k, v in patch.items():
        if v is None and delete_nulls:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v, delete_nulls)
        else:
            out[k] = copy.deepcopy(v)
    return out


def prune(value, schema):
    """`value` as the API server stores it under the structural schema `schema`: an object keeps
    only the properties its schema declares (or every key, each under `additionalProperties`);
    `x-kubernetes-preserve-unknown-fields: true` keeps the unknown ones; an array's items are
    pruned by `items`. apiextensions-apiserver `pkg/apiserver/schema/pruning/algorithm.go`."""
    if not isinstance(schema, dict):
        return value
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    if isinstance(value, dict):
        if schema.get("x-kubernetes-embedded-resource") and preserve:
            return value
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = {}
        for k, v in value.items():
            if props and k in props:
                out[k] = prune(v, props[k])
            elif isinstance(extra, dict):
                out[k] = prune(v, extra)
            elif preserve or extra is True:
                out[k] = v
        return out
    if isinstance(value, list):
        return [prune(v, schema.get("items")) for v in value]
    return value


def strip_volatile(obj):
    o = copy.deepcopy(obj)
    md = o.get("metadata", {})
    for k in ("resourceVersion", "managedFields", "generation", "uid", "creationTimestamp"):
        md.pop(k, None)
    return o


class State:
    def __init__(self, token, crd_delay, discovery_lag=0.0, eks_auth=None):
        self.lock = threading.RLock()
        self.eks_auth = eks_auth
        self.token = token
        self.crd_delay = crd_delay
        self.discovery_lag = discovery_lag
        self.reset()

    def reset(self):
        with self.lock:
            self.resources = {}  # (group, version, plural) -> Resource
            for b in BUILTINS:
                r = Resource(*b)
                self.resources[(r.group, r.version, r.plural)] = r
            self.objects = {}  # (group, plural, ns, name) -> obj
            self.owners = {}  # (group, plural, ns, name) -> {path: manager}
            self.rv = 1000
            self.log = []
            self.faults = []
            self.auto_ready = None  # {"delay": s, "revision": str} for GitRepositories
            # How lists page (`/_fake/lists`): whether `remainingItemCount` is given, and how
            # many continued lists to answer 410 Expired, as after an etcd compaction.
            self.remaining_count = True
            self.expire_continue = 0
            self.writes = 0
            for ns in ("default", "kube-system", "kube-public"):
                self._store(self.resources[("", "v1", "namespaces")], None, {
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                    "status": {"phase": "Active"}}, count=False)

    # -- storage -----------------------------------------------------------------------
    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    def schema_of(self, res):
        """The structural schema of the CRD version that serves `res`; None for a built-in kind."""
        if res is None or not res.crd:
            return None
        crd = self.objects.get(("apiextensions.k8s.io", "customresourcedefinitions", "", res.crd)) or {}
        for v in (crd.get("spec") or {}).get("versions") or []:
            if v.get("name") == res.version:
                return (v.get("schema") or {}).get("openAPIV3Schema")
        return None

    def prune_status(self, res, obj):
        """A custom resource's status, pruned by its CRD's schema (a CRD version without one,
        which apiextensions.k8s.io/v1 refuses, keeps what it is given)."""
        schema = self.schema_of(res)
        if schema is None or "status" not in obj:
            return obj
        status_schema = (schema.get("properties") or {}).get("status")
        if status_schema is None and schema.get("x-kubernetes-preserve-unknown-fields") is not True:
            obj.pop("status")
        elif status_schema is not None:
            obj["status"] = prune(obj["status"], status_schema)
        return obj

    def _store(self, res, ns, obj, count=True):
        self.prune_status(res, obj)
        md = obj.setdefault("metadata", {})
        key = (res.group, res.plural, ns or "", md["name"])
        old = self.objects.get(key)
        md["resourceVersion"] = self.next_rv()
        if ns:
            md["namespace"] = ns
        if old is None:
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_rfc3339()
            md["generation"] = 1
        else:
            omd = old["metadata"]
            md["uid"] = omd["uid"]
            md["creationTimestamp"] = omd["creationTimestamp"]
            gen = omd.get("generation", 1)
            if old.get("spec") != obj.get("spec"):
                gen += 1
            md["generation"] = gen
        self.objects[key] = obj
        if count:
            self.writes += 1
        return obj

    def find_resource(self, group, version, plural):
        return self.resources.get((group, version, plural))

    def resources_by_gv(self):
        gvs = {}
        for r in self.resources.values():
            gvs.setdefault((r.group, r.version), []).append(r)
        return gvs

    # -- CRDs --------------------------------------------------------------------------
    def crd_changed(self, crd):
        name = crd["metadata"]["name"]
        delay = self.crd_delay

        def establish():
            if delay:
                time.sleep(delay)
            with self.lock:
                key = ("apiextensions.k8s.io", "customresourcedefinitions", "", name)
                cur = self.objects.get(key)
                if cur is None:
                    return
                spec = cur.get("spec", {})
                names = spec.get("names", {})
                namespaced = spec.get("scope", "Namespaced") == "Namespaced"
                served = []
                for v in spec.get("versions", []):
                    if not v.get("served", True):
                        continue
                    has_status = "status" in (v.get("subresources") or {})
                    served.append(Resource(spec["group"], v["name"], names["kind"], names["plural"], namespaced,
                                           has_status, names.get("singular"), crd=name, short=names.get("shortNames") or []))

                def register():
                    with self.lock:
                        if key in self.objects:
                            for r in served:
                                self.resources[(r.group, r.version, r.plural)] = r

                # A real API server can report Established a moment before discovery serves
                # the new kinds.
                if self.discovery_lag:
                    threading.Timer(self.discovery_lag, register).start()
                else:
                    register()
                ts = now_rfc3339()
                cur["status"] = {
                    "conditions": [
                        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                         "message": "no conflicts found", "lastTransitionTime": ts},
                        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                         "message": "the initial names have been accepted", "lastTransitionTime": ts},
                    ],
                    "acceptedNames": names,
                    "storedVersions": [v["name"] for v in spec.get("versions", []) if v.get("storage")],
                }
                cur["metadata"]["resourceVersion"] = self.next_rv()

        if delay:
            threading.Thread(target=establish, daemon=True).start()
        else:
            establish()

    def crd_deleted(self, name):
        for k, r in list(self.resources.items()):
            if r.crd == name:
                del self.resources[k]
                for ok in [ok for ok in self.objects if ok[0] == r.group and ok[1] == r.plural]:
                    del self.objects[ok]

    def git_repository_ready(self, ns, name, ready=True, message=None, revision=None):
        """source-controller's answer to a reconcile of the GitRepository, in its shapes
        (fluxcd/source-controller v1.9.1, docs/spec/v1/gitrepositories.md: "Ready GitRepository",
        "Artifact example", "Last Handled Reconcile At"): Ready=True `Succeeded` with the artifact,
        or Ready=False `GitOperationFailed`; the condition and `status.observedGeneration` at the
        object's generation; `lastHandledReconcileAt` the value of the object's
        `reconcile.fluxcd.io/requestedAt` annotation when it has one (fluxcd/pkg
        `runtime/reconcile` ReconcileRequestStatus). With `auto_ready.accepts` (`{"key", "sha256"}`),
        whether the clone works is the Secret `spec.secretRef` names: its `key` must hash to
        `sha256`, else the clone is refused as go-git refuses it ("authentication required",
        plumbing/transport/common.go, wrapped as gitrepository_controller.go and fluxcd/pkg
        git/gogit/clone.go wrap it). Like source-controller, the Secret is read only when the
        GitRepository is reconciled: a changed Secret alone changes nothing."""
        key = ("source.toolkit.fluxcd.io", "gitrepositories", ns, name)
        cur = self.objects.get(key)
        if cur is None:
            return False
        accepts = (self.auto_ready or {}).get("accepts")
        if accepts:
            ref = ((cur.get("spec") or {}).get("secretRef") or {}).get("name")
            secret = self.objects.get(("", "secrets", ns, ref or ""))
            held = ((secret or {}).get("data") or {}).get(accepts["key"])
            try:
                digest = hashlib.sha256(base64.b64decode(held)).hexdigest() if held else None
            except ValueError:
                digest = None
            ready = digest == accepts["sha256"]
            message = None
            if not ready:
                url = (cur.get("spec") or {}).get("url", "")
                message = f"failed to checkout and determine revision: unable to clone '{url}': authentication required"
        revision = revision or "main@sha1:0123456789abcdef0123456789abcdef01234567"
        generation = cur["metadata"].get("generation", 1)
        cond = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "Succeeded" if ready else "GitOperationFailed",
            "message": message or (f"stored artifact for revision '{revision}'" if ready
                                   else "failed to checkout and determine revision"),
            "lastTransitionTime": now_rfc3339(),
            "observedGeneration": generation,
        }
        status = {"conditions": [cond], "observedGeneration": generation}
        requested = (cur["metadata"].get("annotations") or {}).get("reconcile.fluxcd.io/requestedAt")
        if requested:
            status["lastHandledReconcileAt"] = requested
        old = cur.get("status") or {}
        if ready:
            sha = revision.rpartition(":")[2]
            status["artifact"] = {
                "digest": "sha256:" + hashlib.sha256(revision.encode()).hexdigest(),
                "lastUpdateTime": now_rfc3339(),
                "path": f"gitrepository/{ns}/{name}/{sha}.tar.gz",
                "revision": revision,
                "size": 91318,
                "url": f"http://source-controller.{ns}.svc.cluster.local./gitrepository/{ns}/{name}/{sha}.tar.gz",
            }
        elif "artifact" in old:
            # A failed fetch keeps the artifact of the last one that worked.
            status["artifact"] = old["artifact"]
        cur["status"] = status
        self.prune_status(self.find_resource("source.toolkit.fluxcd.io", "v1", "gitrepositories"), cur)
        cur["metadata"]["resourceVersion"] = self.next_rv()
        return True

    def resource_of(self, api_version, kind):
        group, _, version = api_version.rpartition("/")
        for r in self.resources.values():
            if (r.group, r.version, r.kind) == (group, version, kind):
                return r
        return None

    def set_status(self, api_version, kind, ns, name, status):
        """What a controller writes through the status subresource: the status replaced, the
        spec and `metadata.generation` untouched, a new resourceVersion. False when the object
        (or its kind) is not there."""
        res = self.resource_of(api_version, kind)
        cur = res and self.objects.get((res.group, res.plural, ns or "", name))
        if not cur:
            return False
        cur["status"] = copy.deepcopy(status)
        self.prune_status(res, cur)
        cur["metadata"]["resourceVersion"] = self.next_rv()
        return True

    def put_object(self, obj):
        """An object the cluster's own controllers create (a ReplicaSet's Pod, the Flux Operator's
        CRDs and sync objects), status included (pruned by its CRD's schema).
        None when its kind is not served or its namespace does not exist."""
        res = self.resource_of(obj.get("apiVersion", ""), obj.get("kind", ""))
        ns = (obj.get("metadata") or {}).get("namespace") if res and res.namespaced else None
        if res is None or (ns and ("", "namespaces", "", ns) not in self.objects):
            return None
        stored = self._store(res, ns, copy.deepcopy(obj))
        # A CRD a controller makes is Established like any other; a GitRepository is reconciled.
        self.after_write(res, stored)
        return stored

    def set_nodes(self, count):
        """`count` Nodes joined, Ready as the kubelet reports it (the Node reference's
        NodeCondition); the ones before are gone."""
        for key in [k for k in self.objects if k[:2] == ("", "nodes")]:
            del self.objects[key]
        res = self.resources[("", "v1", "nodes")]
        for i in range(count):
            self._store(res, None, {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": f"ip-10-0-{i // 250}-{i % 250 + 1}.eu-west-1.compute.internal"},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                           "message": "kubelet is posting ready status",
                                           "lastHeartbeatTime": now_rfc3339(),
                                           "lastTransitionTime": now_rfc3339()}]}})

    def after_write(self, res, obj):
        if res.group == "apiextensions.k8s.io" and res.plural == "customresourcedefinitions":
            self.crd_changed(obj)
        if (res.group == "source.toolkit.fluxcd.io" and res.plural == "gitrepositories"
                and self.auto_ready is not None):
            ns, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
            cfg = self.auto_ready

            def later():
                time.sleep(cfg.get("delay", 0))
                with self.lock:
                    self.git_repository_ready(ns, name, cfg.get("ready", True), cfg.get("message"),
                                              cfg.get("revision"))

            threading.Thread(target=later, daemon=True).start()


STATE = None


def register_secret(what, value):
    """A secret this fake minted or was handed: checked by tests/leak_check.py."""
    leak_registry.register_secret("kube_fake", what, value)


def parse_token(header, state):
    if not header or not header.startswith("Bearer "):
        return "no bearer token"
    tok = header[len("Bearer "):].strip()
    register_secret("kube fake: bearer token", tok)
    if state.token and tok == state.token:
        return None
    if not tok.startswith("k8s-aws-v1."):
        return "unknown token"
    b64 = tok[len("k8s-aws-v1."):]
    if "=" in b64:
        return "EKS token must be base64url without padding"
    try:
        url = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).decode()
    except Exception:
        return "EKS token is not base64url"
    u = urllib.parse.urlparse(url)
    q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query).items()}
    if q.get("Action") != "GetCallerIdentity" or q.get("Version") != "2011-06-15":
        return "EKS token is not a GetCallerIdentity URL"
    if q.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or not q.get("X-Amz-Signature"):
        return "EKS token URL is not presigned"
    register_secret("kube fake: EKS token's presigned-URL signature", q["X-Amz-Signature"])
    if "x-k8s-aws-id" not in q.get("X-Amz-SignedHeaders", "").split(";"):
        return "EKS token does not sign x-k8s-aws-id"
    cred = q.get("X-Amz-Credential", "").split("/")
    if len(cred) != 5 or cred[3] != "sts" or cred[4] != "aws4_request":
        return "EKS token is not signed for sts"
    try:
        expires = int(q.get("X-Amz-Expires", "0"))
        signed_at = datetime.datetime.strptime(q["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    except Exception:
        return "EKS token has no valid date/expiry"
    if expires <= 0 or expires > 900:
        return "EKS token expiry out of range"
    age = (datetime.datetime.now(datetime.timezone.utc) - signed_at).total_seconds()
    if age > 15 * 60 or age < -300:
        return "EKS token expired"
    if state.eks_auth:
        return eks_authorize(url, state)
    return None


IDENTITY_CACHE = {}


def eks_authorize(url, state):
    """What EKS does with a token: replay the presigned GetCallerIdentity (here, against moto)
    with the cluster name header, then look the caller up in the cluster's access entries."""
    moto_url, region, cluster = state.eks_auth
    arn = IDENTITY_CACHE.get(url)
    if arn is None:
        try:
            req = urllib.request.Request(url, headers={"x-k8s-aws-id": cluster})
            body = urllib.request.urlopen(req, timeout=10).read().decode()
        except Exception as e:
            return f"STS rejected the token: {e}"
        m = re.search(r"<Arn>(.*?)</Arn>", body)
        if not m:
            return "STS answered without an identity"
        arn = IDENTITY_CACHE[url] = m.group(1)
    parts = arn.split(":")
    account, resource = parts[4], parts[5]
    if resource.startswith("assumed-role/"):
        who = ("role", resource.split("/")[1])
    else:
        who = (resource.split("/")[0], resource.split("/")[-1])
    try:
        q = urllib.parse.urlencode({"region": region})
        entries = json.loads(urllib.request.urlopen(f"{moto_url}/_cellbridge/eks/entries/{cluster}?{q}", timeout=10).read())
    except Exception as e:
        return f"cannot read access entries: {e}"
    for e in entries:
        p = e["principalArn"].split(":")
        kind, name = p[5].split("/")[0], p[5].split("/")[-1]
        # EKS matches the principal, whatever path its ARN was written with.
        if p[4] == account and (kind, name) == who:
            if not e.get("policies"):
                return "FORBIDDEN: access entry has no access policy"
            return None
    return f"no access entry for {arn}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle's algorithm on, the second waits for
    # the client's delayed ACK of the first (about 40 ms on Linux) on every keep-alive
    # request. socketserver's own switch sets TCP_NODELAY on each connection.
    disable_nagle_algorithm = True
    server_version = "kube-fake/1.0"

    def log_message(self, fmt, *args):  # keep stderr quiet; the log is at /_fake/requests
        pass

    # -- plumbing -----------------------------------------------------------------------
    def send_json(self, code, body, headers=None):
        data = json.dumps(body).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def dispatch(self, method):
        u = urllib.parse.urlparse(self.path)
        path = u.path
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        body = self.read_body()
        if path.startswith("/_fake/"):
            try:
                return self.control(method, path, query, body)
            except Exception as e:  # a broken control call is a test bug: say so loudly
                return self.send_json(500, {"error": repr(e)})
        st = STATE
        auth = self.headers.get("Authorization") or ""
        # Which credential was used, never the credential: a short digest.
        auth_id = hashlib.sha256(auth.encode()).hexdigest()[:12] if auth else None
        entry = {"method": method, "path": path, "query": u.query, "auth_id": auth_id,
                 "content_type": self.headers.get("Content-Type", ""), "t": time.time(),
                 "status": None, "mutated": False, "fault": None}
        with st.lock:
            st.log.append(entry)
            fault = self.match_fault(method, path)
        if fault is not None:
            entry["fault"] = fault.get("status") or "sleep"
            if fault.get("sleep"):
                time.sleep(fault["sleep"])
            if fault.get("status"):
                code = fault["status"]
                reason = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError",
                          503: "ServiceUnavailable", 504: "Timeout"}.get(code, "InternalError")
                hdrs = {"Retry-After": str(fault["retry_after"])} if fault.get("retry_after") is not None else {}
                entry["status"] = code
                return self.send_json(code, ApiError(code, reason, f"injected fault: {reason}").body(), hdrs)
        auth_err = parse_token(self.headers.get("Authorization"), st)
        if auth_err and auth_err.startswith("FORBIDDEN"):
            entry["status"] = 403
            return self.send_json(403, ApiError(403, "Forbidden", "forbidden: " + auth_err).body())
        if auth_err:
            entry["status"] = 401
            return self.send_json(401, ApiError(401, "Unauthorized", "Unauthorized").body()
                                  | {"details": {"causes": [{"message": auth_err}]}})
        try:
            with st.lock:
                before = st.writes
                code, out = self.api(method, path, query, body)
                entry["mutated"] = st.writes != before
        except ApiError as e:
            entry["status"] = e.code
            return self.send_json(e.code, e.body(), e.headers)
        entry["status"] = code
        self.send_json(code, out)

    def match_fault(self, method, path):
        for f in STATE.faults:
            if f["method"] not in ("*", method):
                continue
            if not re.search(f["path"], path):
                continue
            if f.get("skip", 0) > 0:
                f["skip"] -= 1
                continue
            if f.get("count", 1) <= 0:
                continue
            f["count"] = f.get("count", 1) - 1
            f["hits"] = f.get("hits", 0) + 1
            return dict(f)
        return None

    # -- control ------------------------------------------------------------------------
    def control(self, method, path, query, body):
        st = STATE
        data = json.loads(body) if body else {}
        with st.lock:
            if path == "/_fake/requests":
                if method == "DELETE":
                    st.log = []
                    return self.send_json(200, {})
                return self.send_json(200, st.log)
            if path == "/_fake/faults":
                if method == "DELETE":
                    st.faults = []
                    return self.send_json(200, {})
                if method == "GET":
                    return self.send_json(200, st.faults)
                f = {"method": data.get("method", "*"), "path": data.get("path", ""),
                     "status": data.get("status"), "sleep": data.get("sleep"),
                     "count": data.get("count", 1), "skip": data.get("skip", 0),
                     "retry_after": data.get("retry_after"), "hits": 0}
                st.faults.append(f)
                return self.send_json(200, f)
            if path == "/_fake/objects":
                items = []
                for (group, plural, ns, name), obj in sorted(st.objects.items()):
                    if query.get("kind") and obj.get("kind") != query["kind"]:
                        continue
                    if query.get("brief"):  # names only: CRDs are big
                        obj = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "metadata": {"name": name, "namespace": ns or None}}
                    items.append(obj)
                return self.send_json(200, items)
            if path == "/_fake/gitrepository":
                ok = st.git_repository_ready(data.get("namespace", "flux-system"), data.get("name", "flux-system"),
                                             data.get("ready", True), data.get("message"), data.get("revision"))
                return self.send_json(200 if ok else 404, {"ok": ok})
            if path == "/_fake/status":
                ok = st.set_status(data["apiVersion"], data["kind"], data.get("namespace"), data["name"],
                                   data.get("status") or {})
                return self.send_json(200 if ok else 404, {"ok": ok})
            if path == "/_fake/object":
                stored = st.put_object(data)
                return self.send_json(200 if stored else 404, stored or {"error": "kind or namespace missing"})
            if path == "/_fake/nodes":
                st.set_nodes(int(data.get("count", 0)))
                return self.send_json(200, {})
            if path == "/_fake/lists":
                st.remaining_count = bool(data.get("remaining_count", True))
                st.expire_continue = int(data.get("expire_continue", 0))
                return self.send_json(200, {})
            if path == "/_fake/auto-ready":
                st.auto_ready = data if data.get("enabled", True) else None
                return self.send_json(200, {})
            if path == "/_fake/reset":
                st.reset()
                return self.send_json(200, {})
            if path == "/_fake/stats":
                return self.send_json(200, {"requests": len(st.log), "writes": st.writes})
        return self.send_json(404, {"error": "no such control route"})

    # -- the API ------------------------------------------------------------------------
    def api(self, method, path, query, body):
        st = STATE
        segs = [s for s in path.split("/") if s]
        if path in ("/version", "/version/"):
            return 200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake", "platform": "linux/amd64"}
        if segs == ["api"]:
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if segs == ["apis"]:
            groups = {}
            for (g, v) in sorted(st.resources_by_gv()):
                if g:
                    groups.setdefault(g, []).append(v)
            out = []
            for g, vs in groups.items():
                vs = sorted(vs, key=version_priority)
                gvs = [{"groupVersion": f"{g}/{v}", "version": v} for v in vs]
                out.append({"name": g, "versions": gvs, "preferredVersion": gvs[0]})
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}
        if segs and segs[0] == "openapi":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if len(segs) >= 2 and segs[0] == "api":
            group, version, rest = "", segs[1], segs[2:]
        elif len(segs) >= 3 and segs[0] == "apis":
            group, version, rest = segs[1], segs[2], segs[3:]
        elif len(segs) == 2 and segs[0] == "apis":
            g = segs[1]
            vs = sorted({v for (gg, v) in st.resources_by_gv() if gg == g}, key=version_priority)
            if not vs:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            gvs = [{"groupVersion": f"{g}/{v}", "version": v} for v in vs]
            return 200, {"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": gvs, "preferredVersion": gvs[0]}
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        gv_res = st.resources_by_gv().get((group, version))
        if not gv_res:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "method not allowed")
            resources = []
            for r in sorted(gv_res, key=lambda r: r.plural):
                entry = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                         "kind": r.kind, "verbs": VERBS}
                if r.short:
                    entry["shortNames"] = r.short
                resources.append(entry)
                if r.has_status:
                    resources.append({"name": f"{r.plural}/status", "singularName": "", "namespaced": r.namespaced,
                                      "kind": r.kind, "verbs": ["get", "patch", "update"]})
            gvs = f"{group}/{version}" if group else version
            return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gvs, "resources": resources}
        by_plural = {r.plural: r for r in gv_res}
        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] in by_plural and by_plural[rest[2]].namespaced:
            ns, rest = rest[1], rest[2:]
        res = by_plural.get(rest[0])
        if res is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub and (sub != "status" or not res.has_status):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if res.namespaced and ns is None and name is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        dry = query.get("dryRun") == "All"
        if name is None:
            if method == "GET":
                return 200, self.list(res, ns, query, self.headers.get("Accept") or "")
            if method == "POST":
                obj = self.decode(body)
                return self.create(res, ns, obj, dry)
            raise ApiError(405, "MethodNotAllowed", "method not allowed")
        key = (res.group, res.plural, ns or "", name)
        cur = st.objects.get(key)
        if method == "GET":
            if cur is None:
                raise not_found(res.plural, name, res.group)
            return 200, cur
        if method == "DELETE":
            if cur is None:
                raise not_found(res.plural, name, res.group)
            if not dry:
                del st.objects[key]
                st.owners.pop(key, None)
                st.writes += 1
                if res.plural == "namespaces" and res.group == "":
                    for k in [k for k in st.objects if k[2] == name]:
                        del st.objects[k]
                if res.plural == "customresourcedefinitions":
                    st.crd_deleted(name)
            return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success",
                         "details": {"name": name, "group": res.group, "kind": res.plural, "uid": cur["metadata"]["uid"]}}
        if method == "PUT":
            obj = self.decode(body)
            self.check_identity(res, ns, name, obj)
            if cur is None:
                if sub:
                    raise not_found(res.plural, name, res.group)
                return self.create(res, ns, obj, dry)
            rv = obj.get("metadata", {}).get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {res.plural} "{name}": '
                               "the object has been modified; please apply your changes to the latest version and try again")
            new = self.merge_status(res, cur, obj, sub)
            return self.write(res, ns, cur, new, dry)
        if method == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype == "application/apply-patch+yaml":
                return self.apply(res, ns, name, sub, cur, body, query, dry)
            if ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                if cur is None:
                    raise not_found(res.plural, name, res.group)
                patch = self.decode(body)
                new = deep_merge(cur, patch, delete_nulls=True)
                new = self.merge_status(res, cur, new, sub)
                return self.write(res, ns, cur, new, dry)
            raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {ctype}")
        raise ApiError(405, "MethodNotAllowed", "method not allowed")

    def decode(self, body):
        try:
            return json.loads(body)
        except ValueError:
            if yaml is None:
                raise ApiError(400, "BadRequest", "body is not JSON")
            try:
                return yaml.safe_load(body)
            except Exception as e:
                raise ApiError(400, "BadRequest", f"error decoding YAML: {e}")

    def check_identity(self, res, ns, name, obj):
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "body is not an object")
        if obj.get("apiVersion") != res.api_version() or obj.get("kind") != res.kind:
            raise ApiError(400, "BadRequest",
                           f"the API version in the data ({obj.get('apiVersion')}) and kind ({obj.get('kind')}) "
                           f"do not match the resource {res.api_version()}/{res.kind}")
        md = obj.get("metadata") or {}
        if name is not None and md.get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        if ns and md.get("namespace") not in (None, "", ns):
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")

    def check_namespace(self, ns):
        if ns and ("", "namespaces", "", ns) not in STATE.objects:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found',
                           {"name": ns, "kind": "namespaces"})

    def normalize(self, res, obj):
        if res.group == "" and res.plural == "secrets":
            sd = obj.pop("stringData", None) or {}
            data = dict(obj.get("data") or {})
            for k, v in data.items():
                try:
                    base64.b64decode(v, validate=True)
                except Exception:
                    raise ApiError(422, "Invalid", f"Secret \"{obj['metadata'].get('name')}\" is invalid: data[{k}]: Invalid value: illegal base64 data")
            for k, v in sd.items():
                data[k] = base64.b64encode(v.encode()).decode()
            obj["data"] = data
            obj.setdefault("type", "Opaque")
        if res.plural == "customresourcedefinitions":
            spec = obj.get("spec") or {}
            if not spec.get("group") or not spec.get("names", {}).get("plural") or not spec.get("versions"):
                raise ApiError(422, "Invalid", f"CustomResourceDefinition \"{obj['metadata'].get('name')}\" is invalid")
            expect = f"{spec['names']['plural']}.{spec['group']}"
            if obj["metadata"]["name"] != expect:
                raise ApiError(422, "Invalid", f"CustomResourceDefinition \"{obj['metadata']['name']}\" is invalid: "
                               f"metadata.name: Invalid value: must be spec.names.plural+\".\"+spec.group")
        return obj

    def merge_status(self, res, cur, new, sub):
        new = copy.deepcopy(new)
        if sub == "status":
            out = copy.deepcopy(cur)
            if "status" in new:
                out["status"] = new["status"]
            return out
        if res.has_status:
            if "status" in cur:
                new["status"] = copy.deepcopy(cur["status"])
            else:
                new.pop("status", None)
        return new

    def list(self, res, ns, query=None, accept=""):
        st = STATE
        query = query or {}
        items = [o for (g, p, n, _), o in sorted(st.objects.items())
                 if g == res.group and p == res.plural and (ns is None or n == ns)]
        meta = {"resourceVersion": str(st.rv)}
        # The continue token is opaque to clients; here it is the offset of the next page. A
        # token can outlive the resource version it was issued at: "If the API server's
        # resourceVersion ... has been compacted, the server responds with 410 Gone"; the client
        # then starts the list again without it
        # (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks).
        if query.get("continue") and st.expire_continue > 0:
            st.expire_continue -= 1
            raise ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
        try:
            start = int(base64.urlsafe_b64decode(query["continue"]).decode()) if query.get("continue") else 0
        except ValueError:
            raise ApiError(400, "BadRequest", "continue key is not valid")
        limit = int(query.get("limit") or 0)
        if limit > 0 or start:
            end = start + limit if limit > 0 else len(items)
            if end < len(items):
                meta["continue"] = base64.urlsafe_b64encode(str(end).encode()).decode()
                # Optional in the API ("may be unset", ListMeta.remainingItemCount, e.g. for a
                # list with a label or field selector): a client cannot rely on it.
                if st.remaining_count:
                    meta["remainingItemCount"] = len(items) - end
            items = items[start:end]
        if "as=PartialObjectMetadataList" in accept:
            # Metadata only, as the API server answers this Accept since Kubernetes 1.15
            # (meta.k8s.io/v1 PartialObjectMetadataList, kubernetes/kubernetes PR 77448; what
            # client-go's `metadata` client and kube-rs's `list_metadata` ask for).
            meta_only = {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata"}
            return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                    "items": [dict(meta_only, metadata=o["metadata"]) for o in items]}
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version(), "metadata": meta, "items": items}

    def create(self, res, ns, obj, dry):
        st = STATE
        self.check_identity(res, ns, None, obj)
        md = obj.setdefault("metadata", {})
        if not md.get("name"):
            raise ApiError(422, "Invalid", f"{res.kind} is invalid: metadata.name: Required value: name is required")
        self.check_namespace(ns if res.namespaced else None)
        key = (res.group, res.plural, ns or "", md["name"])
        if key in st.objects:
            raise ApiError(409, "AlreadyExists", f'{res.plural} "{md["name"]}" already exists',
                           {"name": md["name"], "group": res.group, "kind": res.plural})
        obj = self.normalize(res, copy.deepcopy(obj))
        if res.has_status:
            obj.pop("status", None)
        if res.plural == "namespaces" and res.group == "":
            obj["status"] = {"phase": "Active"}
        if dry:
            return 201, obj
        stored = st._store(res, ns, obj)
        st.after_write(res, stored)
        return 201, stored

    def write(self, res, ns, cur, new, dry):
        st = STATE
        new = self.normalize(res, new)
        if strip_volatile(new) == strip_volatile(cur):
            return 200, cur  # a no-op write does not bump resourceVersion, as in the real API
        if dry:
            return 200, new
        new["metadata"]["managedFields"] = cur["metadata"].get("managedFields", [])
        stored = st._store(res, ns, new)
        st.after_write(res, stored)
        return 200, stored

    def apply(self, res, ns, name, sub, cur, body, query, dry):
        st = STATE
        manager = query.get("fieldManager")
        if not manager:
            raise ApiError(400, "BadRequest", "PATCH requests with apply-patch content type require fieldManager")
        force = query.get("force") == "true"
        cfg = self.decode(body)
        self.check_identity(res, ns, name, cfg)
        cfg.setdefault("metadata", {})["name"] = name
        if res.namespaced:
            cfg["metadata"]["namespace"] = ns
        for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
            cfg["metadata"].pop(k, None)
        key = (res.group, res.plural, ns or "", name)
        if sub == "status":
            cfg_paths = {p: v for p, v in flatten({"status": cfg.get("status", {})}).items()}
        else:
            if res.has_status:
                cfg.pop("status", None)
            cfg_paths = flatten({k: v for k, v in cfg.items() if k not in ("apiVersion", "kind")})
        if cur is None:
            if sub:
                raise not_found(res.plural, name, res.group)
            self.check_namespace(ns if res.namespaced else None)
            obj = self.normalize(res, copy.deepcopy(cfg))
            if res.plural == "namespaces" and res.group == "":
                obj["status"] = {"phase": "Active"}
            obj["metadata"]["managedFields"] = [self.managed_entry(res, manager)]
            if dry:
                return 201, obj
            stored = st._store(res, ns, obj)
            st.owners[key] = {p: manager for p in cfg_paths}
            st.after_write(res, stored)
            return 201, stored
        owners = st.owners.setdefault(key, {})
        conflicts = []
        for p, v in cfg_paths.items():
            owner = owners.get(p)
            if owner and owner != manager and get_path(cur, p) != v:
                conflicts.append((p, owner))
        if conflicts and not force:
            causes = [{"reason": "FieldManagerConflict", "message": f'conflict with "{o}"', "field": "." + ".".join(p)}
                      for p, o in conflicts]
            raise ApiError(409, "Conflict", f"Apply failed with {len(conflicts)} conflict(s): "
                           + "; ".join(f'conflict with "{o}": .{".".join(p)}' for p, o in conflicts),
                           {"causes": causes})
        # Fields this manager applied before and no longer applies are removed (when nobody
        # else owns them), the rest of the object is kept.
        new = copy.deepcopy(cur)
        for p, o in list(owners.items()):
            if o == manager and p not in cfg_paths:
                parent = get_path(new, p[:-1]) if len(p) > 1 else new
                if isinstance(parent, dict):
                    parent.pop(p[-1], None)
                del owners[p]
        if sub == "status":
            new = deep_merge(new, {"status": cfg.get("status", {})})
        else:
            new = deep_merge(new, cfg)
        for p in cfg_paths:
            owners[p] = manager
        if res.group == "" and res.plural == "secrets" and "stringData" in new:
            new["data"] = {k: v for k, v in (new.get("data") or {}).items()}
        mf = [e for e in cur["metadata"].get("managedFields", []) if e.get("manager") != manager]
        mf.append(self.managed_entry(res, manager))
        new["metadata"]["managedFields"] = mf
        return self.write(res, ns, cur, new, dry)

    def managed_entry(self, res, manager):
        return {"manager": manager, "operation": "Apply", "apiVersion": res.api_version(),
                "time": now_rfc3339(), "fieldsType": "FieldsV1", "fieldsV1": {}}


def version_priority(v):
    """Kubernetes version ordering: GA before beta before alpha, higher numbers first."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
    if not m:
        return (3, 0, 0, v)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor, v)


def make_tls(ca_out):
    """A CA and a server certificate for 127.0.0.1/localhost signed by it: the client must
    trust the CA (what DescribeCluster returns), as with a real EKS endpoint."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-fake-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    d = tempfile.mkdtemp(prefix="kube-fake-")
    cert_path, key_path = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    ca_path = ca_out or os.path.join(d, "ca.pem")
    with open(ca_path, "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_path, key_path)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx, ca_path


def main():
    global STATE
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--ca-out")
    ap.add_argument("--token", default="fake-admin-token")
    ap.add_argument("--crd-delay", type=float, default=0.2)
    ap.add_argument("--discovery-lag", type=float, default=0.0)
    ap.add_argument("--eks-auth", help="MOTO_URL,REGION,CLUSTER: authorize EKS tokens like EKS does")
    args = ap.parse_args()
    eks_auth = tuple(args.eks_auth.split(",", 2)) if args.eks_auth else None
    STATE = State(args.token, args.crd_delay, args.discovery_lag, eks_auth)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.tls:
        ctx, ca_path = make_tls(args.ca_out)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        print(f"CA={ca_path}", flush=True)
        # The control API is also served in plain HTTP, so a test needs no TLS client for it.
        control = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        control.daemon_threads = True
        threading.Thread(target=control.serve_forever, daemon=True).start()
        print(f"CONTROL_PORT={control.server_address[1]}", flush=True)
    else:
        print(f"CONTROL_PORT={server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT={server.server_address[1]}", flush=True)
    try:
        sys.stdin.read()
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
