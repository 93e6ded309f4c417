"""Tests of kube_fake's reads for the bootstrap's confirmation: what the cluster's own controllers
write (`/_fake/status`, `/_fake/object`, `/_fake/nodes`) is what a client reads back, status
included, and lists page with `limit` and `continue` as the API server does
(https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks).

The fake runs in this process, in plain HTTP, with a static token.
"""
import json
import os
import sys
import threading
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kube_fake as kf  # noqa: E402

TOKEN = "test-token"


@pytest.fixture
def server():
    kf.STATE = kf.State(TOKEN, crd_delay=0)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), kf.Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def call(base, method, path, body=None, accept=None, content_type="application/json"):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body is not None else None)
    if not path.startswith("/_fake/"):
        req.add_header("Authorization", f"Bearer {TOKEN}")
    req.add_header("Content-Type", content_type)
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def flux_system(base):
    status, _ = call(base, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": "flux-system"}})
    assert status == 201


def test_nodes_join_and_page_with_the_remaining_count(server):
    status, body = call(server, "GET", "/api/v1/nodes")
    assert status == 200 and body["kind"] == "NodeList" and body["items"] == []
    assert call(server, "POST", "/_fake/nodes", {"count": 5})[0] == 200
    _, page = call(server, "GET", "/api/v1/nodes?limit=2")
    assert len(page["items"]) == 2 and page["metadata"]["remainingItemCount"] == 3
    names = [n["metadata"]["name"] for n in page["items"]]
    while page["metadata"].get("continue"):
        _, page = call(server, "GET", f"/api/v1/nodes?limit=2&continue={page['metadata']['continue']}")
        names += [n["metadata"]["name"] for n in page["items"]]
    assert len(set(names)) == 5
    assert "remainingItemCount" not in page["metadata"], "the last page says nothing remains"
    ready = page["items"][-1]["status"]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "KubeletReady")
    # Metadata only, when asked for it.
    _, meta = call(server, "GET", "/api/v1/nodes",
                   accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    assert meta["kind"] == "PartialObjectMetadataList" and len(meta["items"]) == 5
    assert set(meta["items"][0]) == {"apiVersion", "kind", "metadata"}
    # Nodes that leave are gone.
    call(server, "POST", "/_fake/nodes", {"count": 0})
    assert call(server, "GET", "/api/v1/nodes")[1]["items"] == []


def test_a_controllers_status_is_read_back_and_an_apply_keeps_it(server):
    flux_system(server)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "source-controller", "namespace": "flux-system"}, "spec": {"replicas": 1}}
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "flux-system", "name": "source-controller"}
    available = {"conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                                 "message": "Deployment has minimum availability."}]}
    assert call(server, "POST", "/_fake/status", dict(target, status=available))[0] == 404, "not applied yet"
    path = "/apis/apps/v1/namespaces/flux-system/deployments/source-controller?fieldManager=cellbridge&force=true"
    assert call(server, "PATCH", path, deployment, content_type="application/apply-patch+yaml")[0] == 201
    assert call(server, "POST", "/_fake/status", dict(target, status=available))[0] == 200
    _, got = call(server, "GET", "/apis/apps/v1/namespaces/flux-system/deployments/source-controller")
    assert got["status"] == available and got["metadata"]["generation"] == 1
    # The applier owns the spec, never the status: a second apply leaves what the controller wrote.
    deployment["spec"]["replicas"] = 2
    call(server, "PATCH", path, deployment, content_type="application/apply-patch+yaml")
    _, got = call(server, "GET", "/apis/apps/v1/namespaces/flux-system/deployments/source-controller")
    assert got["status"] == available and got["metadata"]["generation"] == 2


def test_a_continued_list_can_expire_and_the_remaining_count_be_absent(server):
    call(server, "POST", "/_fake/nodes", {"count": 3})
    call(server, "POST", "/_fake/lists", {"remaining_count": False, "expire_continue": 1})
    _, page = call(server, "GET", "/api/v1/nodes?limit=2")
    assert page["metadata"].get("continue") and "remainingItemCount" not in page["metadata"]
    status, body = call(server, "GET", f"/api/v1/nodes?limit=2&continue={page['metadata']['continue']}")
    assert (status, body["reason"]) == (410, "Expired")
    # Started again without the token, the list completes.
    _, page = call(server, "GET", "/api/v1/nodes?limit=2")
    status, rest = call(server, "GET", f"/api/v1/nodes?limit=2&continue={page['metadata']['continue']}")
    assert status == 200 and len(page["items"]) + len(rest["items"]) == 3


def test_a_pod_the_controllers_made_is_listed_with_its_status(server):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "source-controller-6d8f7b9c4-x2x7k", "namespace": "flux-system"},
           "status": {"phase": "Pending"}}
    assert call(server, "POST", "/_fake/object", pod)[0] == 404, "no namespace yet"
    flux_system(server)
    assert call(server, "POST", "/_fake/object", pod)[0] == 200
    _, pods = call(server, "GET", "/api/v1/namespaces/flux-system/pods")
    assert [p["status"]["phase"] for p in pods["items"]] == ["Pending"]
    assert call(server, "POST", "/_fake/object", dict(pod, kind="FluxInstance"))[0] == 404, "a kind not served"


def test_the_flux_operators_crds_and_a_flux_instance_are_served_once_established(server):
    """The Flux Operator's own install manifest (the trimmed v0.58.1 fixture) applies whole, and
    its FluxInstance kind is served, with a status the operator writes, only once its CRD is in."""
    import yaml
    fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "flux-operator", "fleet",
                           "clusters", "_template", "flux-system")
    with open(os.path.join(fixture, "flux-operator-install.yaml")) as f:
        install = [d for d in yaml.safe_load_all(f) if d]
    with open(os.path.join(fixture, "flux-instance.yaml")) as f:
        instance = yaml.safe_load(f)
    fi_path = "/apis/fluxcd.controlplane.io/v1/namespaces/flux-system/fluxinstances/flux?fieldManager=cellbridge&force=true"
    flux_system(server)
    status, body = call(server, "PATCH", fi_path, instance, content_type="application/apply-patch+yaml")
    assert status == 404, "no CRD yet: the kind is not served"
    plural = {"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
              "Service": "services", "Deployment": "deployments", "CustomResourceDefinition": "customresourcedefinitions",
              "Namespace": "namespaces"}
    for obj in install:
        group, _, version = obj["apiVersion"].rpartition("/")
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        ns = obj["metadata"].get("namespace")
        where = f"/namespaces/{ns}" if ns else ""
        path = f"{base}{where}/{plural[obj['kind']]}/{obj['metadata']['name']}?fieldManager=cellbridge&force=true"
        status, body = call(server, "PATCH", path, obj, content_type="application/apply-patch+yaml")
        assert status in (200, 201), (obj["kind"], obj["metadata"]["name"], body)
    _, crd = call(server, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/fluxinstances.fluxcd.controlplane.io")
    assert any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"])
    _, discovery = call(server, "GET", "/apis/fluxcd.controlplane.io/v1")
    assert {"fluxinstances", "fluxreports"} <= {r["name"] for r in discovery["resources"]}
    assert call(server, "PATCH", fi_path, instance, content_type="application/apply-patch+yaml")[0] == 201
    ready = {"conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                             "message": "Reconciliation finished in 30s"}]}
    target = {"apiVersion": "fluxcd.controlplane.io/v1", "kind": "FluxInstance", "namespace": "flux-system", "name": "flux"}
    assert call(server, "POST", "/_fake/status", dict(target, status=ready))[0] == 200
    _, got = call(server, "GET", "/apis/fluxcd.controlplane.io/v1/namespaces/flux-system/fluxinstances/flux")
    assert got["spec"]["sync"]["pullSecret"] == "flux-system" and got["status"] == ready


def apply(base, obj):
    """Server-side apply of `obj` by `cellbridge`, as the bootstrap applies."""
    plural = {"CustomResourceDefinition": "customresourcedefinitions", "GitRepository": "gitrepositories",
              "Secret": "secrets", "FluxInstance": "fluxinstances", "Widget": "widgets"}[obj["kind"]]
    group, _, version = obj["apiVersion"].rpartition("/")
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    ns = obj["metadata"].get("namespace")
    where = f"/namespaces/{ns}" if ns else ""
    path = f"{prefix}{where}/{plural}/{obj['metadata']['name']}?fieldManager=cellbridge&force=true"
    return call(base, "PATCH", path, obj, content_type="application/apply-patch+yaml")


def fixture_docs(*path):
    import yaml
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", *path)
    with open(here) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def test_a_status_field_the_crd_does_not_declare_is_dropped_as_the_api_server_prunes_it(server):
    """flux-operator v0.58.1's FluxInstance CRD declares no top-level `status.observedGeneration`
    (api/v1/fluxinstance_types.go, FluxInstanceStatus: only each condition has one): written by
    the status subresource, through `/_fake/status` or by a client, it is dropped, with any other
    field the schema does not declare; what it declares is kept."""
    install = fixture_docs("flux-operator", "fleet", "clusters", "_template", "flux-system", "flux-operator-install.yaml")
    instance = fixture_docs("flux-operator", "fleet", "clusters", "_template", "flux-system", "flux-instance.yaml")[0]
    flux_system(server)
    for crd in [d for d in install if d["kind"] == "CustomResourceDefinition"]:
        assert apply(server, crd)[0] in (200, 201)
    assert apply(server, instance)[0] == 201
    # flux-operator docs/api/v1/fluxinstance.md, the `kubectl describe` example, plus the invented fields.
    condition = {"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                 "message": "Reconciliation finished in 52s", "observedGeneration": 1,
                 "lastTransitionTime": "2024-06-03T12:20:57Z"}
    written = {"observedGeneration": 1, "invented": {"a": 1},
               "lastAppliedRevision": "v2.3.0@sha256:4cc5babdb1279ad0177bf513292deadbfa3f7b7c3da0be7fa53b39ab434f7219",
               "conditions": [dict(condition, undeclared="x")]}
    target = {"apiVersion": "fluxcd.controlplane.io/v1", "kind": "FluxInstance", "namespace": "flux-system", "name": "flux"}
    assert call(server, "POST", "/_fake/status", dict(target, status=written))[0] == 200
    path = "/apis/fluxcd.controlplane.io/v1/namespaces/flux-system/fluxinstances/flux"
    _, got = call(server, "GET", path)
    assert got["status"] == {"lastAppliedRevision": written["lastAppliedRevision"], "conditions": [condition]}
    # The same through the status subresource, as the operator writes it (a merge patch).
    status, got = call(server, "PATCH", path + "/status", {"status": {"observedGeneration": 2}},
                       content_type="application/merge-patch+json")
    assert status == 200 and "observedGeneration" not in got["status"], got["status"]


def test_a_node_marked_to_preserve_unknown_fields_keeps_them(server):
    """`x-kubernetes-preserve-unknown-fields: true` keeps what its node does not declare; the
    declared siblings are still pruned below it."""
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "status": {"type": "object", "properties": {
            "known": {"type": "string"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        }}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "Widget", "plural": "widgets"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": schema}}]}}
    flux_system(server)
    assert apply(server, crd)[0] == 201
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "flux-system"},
              "spec": {"anything": {"goes": 1}}}
    assert apply(server, widget)[0] == 201
    status = {"known": "k", "unknown": "u", "free": {"x": {"y": 1}}, "labels": {"a": "b"}}
    target = {"apiVersion": "example.com/v1", "kind": "Widget", "namespace": "flux-system", "name": "w"}
    assert call(server, "POST", "/_fake/status", dict(target, status=status))[0] == 200
    _, got = call(server, "GET", "/apis/example.com/v1/namespaces/flux-system/widgets/w")
    assert got["status"] == {"known": "k", "free": {"x": {"y": 1}}, "labels": {"a": "b"}}
    assert got["spec"] == {"anything": {"goes": 1}}


def test_source_controller_reads_a_changed_secret_only_when_asked_to_reconcile(server):
    """With `accepts`, the GitRepository's Ready is the Secret it names: a changed Secret alone
    changes nothing (source-controller reconciles on its interval or when asked); a new
    `reconcile.fluxcd.io/requestedAt` is reconciled and reported in `lastHandledReconcileAt`
    (source-controller v1.9.1 docs/spec/v1/gitrepositories.md, "Triggering a reconcile")."""
    import base64
    import hashlib
    import time
    import yaml
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "flux", "fleet", "clusters",
                        "_template", "flux-system", "gotk-components.yaml")
    with open(here) as f:
        # Only the GitRepository CRD's document is parsed: the file is large.
        doc = next(d for d in f.read().split("\n---\n") if "name: gitrepositories.source.toolkit.fluxcd.io" in d)
    crd = yaml.safe_load(doc)
    flux_system(server)
    assert apply(server, crd)[0] == 201
    good = hashlib.sha256(b"new-token").hexdigest()
    assert call(server, "POST", "/_fake/auto-ready", {"accepts": {"key": "password", "sha256": good}})[0] == 200

    def secret(value):
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "flux-system", "namespace": "flux-system"},
                "data": {"username": base64.b64encode(b"git").decode(), "password": base64.b64encode(value).decode()}}

    assert apply(server, secret(b"old-token"))[0] == 201
    repo = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "flux-system", "namespace": "flux-system"},
            "spec": {"url": "https://github.com/acme/fleet", "secretRef": {"name": "flux-system"}, "interval": "1m"}}
    assert apply(server, repo)[0] == 201
    path = "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories/flux-system"

    def ready():
        for _ in range(50):
            _, got = call(server, "GET", path)
            if got.get("status"):
                return got["status"]
            time.sleep(0.02)
        raise AssertionError("source-controller never answered")

    st = ready()
    assert st["conditions"][0]["status"] == "False" and "authentication required" in st["conditions"][0]["message"]
    assert "lastHandledReconcileAt" not in st
    assert apply(server, secret(b"new-token"))[0] == 200
    time.sleep(0.1)
    assert ready()["conditions"][0]["status"] == "False", "a Secret's change alone is not reconciled"
    patch = {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "2026-12-07T20:00:00Z"}}}
    assert call(server, "PATCH", path, patch, content_type="application/merge-patch+json")[0] == 200
    for _ in range(50):
        st = ready()
        if st.get("lastHandledReconcileAt"):
            break
        time.sleep(0.02)
    assert st["lastHandledReconcileAt"] == "2026-12-07T20:00:00Z"
    assert st["conditions"][0]["status"] == "True" and st["artifact"]["revision"].startswith("main@sha1:")
