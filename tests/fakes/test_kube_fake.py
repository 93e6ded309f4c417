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
