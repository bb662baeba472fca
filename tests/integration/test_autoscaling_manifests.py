"""deploy/autoscaling/: KEDA ScaledObjects and plain HPAs that scale the kpoold pods and kpool
serve on kpool's own metrics. Checked offline: both overlays render on top of deploy/kubernetes
(`kubectl kustomize`), target the base's Deployments and take their replica counts over; and
every metric a query reads is one a real kpoold and kpool serve export on /metrics."""
import os
import re
import shutil
import subprocess

import pytest
import requests
import yaml

from serve_fixtures import Serve
from conftest import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
AUTOSCALING = os.path.join(HERE, "..", "..", "deploy", "autoscaling")


def read(*path):
    with open(os.path.join(AUTOSCALING, *path)) as f:
        return list(yaml.safe_load_all(f))


def render(overlay):
    if not shutil.which("kubectl"):
        pytest.skip("kubectl is not installed: the render is not checked")
    r = subprocess.run(["kubectl", "kustomize", os.path.join(AUTOSCALING, overlay)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return list(yaml.safe_load_all(r.stdout))


def queries():
    """Every PromQL text the autoscalers run: KEDA's queries and the adapter's rules."""
    found = []
    for obj in read("keda", "scaledobjects.yaml"):
        found += [t["metadata"]["query"] for t in obj["spec"]["triggers"]]
    for rule in read("hpa", "prometheus-adapter-rules.yaml")[0]["externalRules"]:
        found += [rule["seriesQuery"], rule["metricsQuery"]]
    return found


@pytest.mark.parametrize("overlay, kind", [("keda", "ScaledObject"), ("hpa", "HorizontalPodAutoscaler")])
def test_each_overlay_renders_and_scales_the_base_deployments(overlay, kind):
    rendered = render(overlay)
    deployments = {d["metadata"]["name"]: d for d in rendered if d["kind"] == "Deployment"}
    scalers = [d for d in rendered if d["kind"] == kind]
    assert {"kpool", "kpool-serve"} == set(deployments)
    targets = {s["spec"]["scaleTargetRef"]["name"] for s in scalers}
    assert targets == set(deployments), "each Deployment scaled, and only those"
    for d in deployments.values():
        assert "replicas" not in d["spec"], "the autoscaler owns the replica count"
    for s in scalers:
        spec = s["spec"]
        assert s["metadata"]["namespace"] == "kpool"
        low, high = (spec["minReplicaCount"], spec["maxReplicaCount"]) if kind == "ScaledObject" \
            else (spec["minReplicas"], spec["maxReplicas"])
        assert 1 <= low <= high
        if kind == "ScaledObject":
            for t in spec["triggers"]:
                assert t["type"] == "prometheus" and float(t["metadata"]["threshold"]) > 0
        else:
            assert spec["scaleTargetRef"]["kind"] == "Deployment"
            assert spec["scaleTargetRef"]["apiVersion"] == "apps/v1"


def test_the_hpas_read_what_the_adapter_rules_serve():
    served = {r["name"]["as"] for r in read("hpa", "prometheus-adapter-rules.yaml")[0]["externalRules"]}
    used = {m["external"]["metric"]["name"] for h in read("hpa", "hpa.yaml") for m in h["spec"]["metrics"]}
    assert used == served


def exported(text):
    """The metric names a /metrics page has (each family's # TYPE line)."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def test_every_metric_the_autoscalers_read_is_one_kpool_exports(kpoold):
    port = free_port()
    d = kpoold("[pools.python3]\nsize = 1\n", 'metrics = "127.0.0.1:%d"\n' % port)
    d.wait_warm("python3", 1)
    s = Serve(d.endpoint)
    try:
        # One request, so that every family has a series (a family without one is not listed).
        r = s.post("/v1/exec", {"code": "1"})
        assert r.status_code == 200, r.text
        names = exported(requests.get("http://127.0.0.1:%d/metrics" % port, timeout=10).text)
        names |= exported(s.get("/metrics").text)
    finally:
        assert s.stop() == 0, s.log_text()
    assert "kpool_pool_warm_kernels" in names and "kpool_serve_waiting" in names  # both pages read
    read_by_autoscalers = set()
    for q in queries():
        read_by_autoscalers |= set(re.findall(r"\bkpool_[a-z_]+\b", q))
    assert read_by_autoscalers, "no query names a metric"
    missing = read_by_autoscalers - names
    assert not missing, "the autoscalers read metrics kpool does not export: %s" % sorted(missing)
