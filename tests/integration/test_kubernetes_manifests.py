"""deploy/kubernetes/ checked offline (kubectl's dry run needs a cluster): the kustomization renders
(`kubectl kustomize`, where kubectl is installed) and holds every manifest but the Secrets, every
manifest parses, the fields used are the ones Kubernetes knows, names and labels agree across
objects, /v1/run's notebooks reach the kernels, the NetworkPolicy covers the ports, and the
ConfigMap's kpool.toml passes `kpoold --check-config` with the pod's environment."""
import json
import os
import shutil
import subprocess
import tomllib

import nbformat
import pytest
import yaml

from conftest import KPOOLD

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFESTS = os.path.join(HERE, "..", "..", "deploy", "kubernetes")

# The keys each object (and the nested parts we use) may have: a typo is an unknown key.
SCHEMA = {
    "Namespace": {"apiVersion", "kind", "metadata"},
    "ConfigMap": {"apiVersion", "kind", "metadata", "data"},
    "Secret": {"apiVersion", "kind", "metadata", "type", "stringData", "data"},
    "Service": {"apiVersion", "kind", "metadata", "spec"},
    "Deployment": {"apiVersion", "kind", "metadata", "spec"},
    "NetworkPolicy": {"apiVersion", "kind", "metadata", "spec"},
}
API = {"Namespace": "v1", "ConfigMap": "v1", "Secret": "v1", "Service": "v1", "Deployment": "apps/v1", "NetworkPolicy": "networking.k8s.io/v1"}
# In the directory but not applied: the Secrets' shape, and the kustomization itself.
NOT_RESOURCES = {"secrets.example.yaml", "kustomization.yaml"}
POD_SPEC = {"terminationGracePeriodSeconds", "enableServiceLinks", "automountServiceAccountToken",
            "securityContext", "initContainers", "containers", "volumes", "hostUsers",
            "topologySpreadConstraints"}
CONTAINER = {"name", "image", "command", "env", "ports", "readinessProbe", "livenessProbe",
             "resources", "securityContext", "volumeMounts"}
POD_SECURITY = {"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup", "seccompProfile"}
CONTAINER_SECURITY = {"allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities", "procMount",
                      "seccompProfile", "appArmorProfile"}
PROBE = {"exec", "httpGet", "initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold"}


def kustomization():
    with open(os.path.join(MANIFESTS, "kustomization.yaml")) as f:
        return yaml.safe_load(f)


def load(names):
    """Every object of the named manifests, keyed by (kind, name)."""
    found = {}
    for name in names:
        with open(os.path.join(MANIFESTS, name)) as f:
            for doc in yaml.safe_load_all(f):
                key = (doc["kind"], doc["metadata"]["name"])
                assert key not in found, "%s %s defined twice" % key
                found[key] = doc
    return found


def all_objects():
    """What `kubectl apply -k` applies, and the example Secrets beside it (made by hand)."""
    found = load(kustomization()["resources"])
    found.update(load(["secrets.example.yaml"]))
    return found


def objects():
    """kpoold's objects (its Deployment and what it uses), keyed by kind."""
    return {kind: doc for (kind, name), doc in all_objects().items()
            if not name.startswith("kpool-serve") and name != "kpool-notebooks"}


def pod_specs():
    return [obj["spec"]["template"]["spec"] for obj in all_objects().values()
            if obj["kind"] == "Deployment"]


def test_the_kustomization_applies_every_manifest_but_the_secrets_and_sets_the_image():
    on_disk = {n for n in os.listdir(MANIFESTS) if n.endswith(".yaml")}
    assert set(kustomization()["resources"]) == on_disk - NOT_RESOURCES
    applied = load(kustomization()["resources"])
    # An apply never puts the placeholders over real keys (issue #53 item 4).
    assert not [key for key in applied if key[0] == "Secret"]
    for pod in pod_specs():
        for c in pod["containers"] + pod.get("initContainers", []):
            assert c["image"] == "kpool"  # kustomize's `images` names the real one
    assert [i["name"] for i in kustomization()["images"]] == ["kpool"]
    if not shutil.which("kubectl"):
        pytest.skip("kubectl is not installed: the render itself is not checked")
    r = subprocess.run(["kubectl", "kustomize", MANIFESTS], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rendered = list(yaml.safe_load_all(r.stdout))
    assert {(d["kind"], d["metadata"]["name"]) for d in rendered} == set(applied)
    image = kustomization()["images"][0]
    images = {c["image"] for d in rendered if d["kind"] == "Deployment"
              for c in d["spec"]["template"]["spec"]["containers"] + d["spec"]["template"]["spec"].get("initContainers", [])}
    assert images == {"%s:%s" % (image["newName"], image["newTag"])}


def test_v1_run_notebooks_are_where_the_kernels_work():
    """kpool serve reads a notebook under --root; its kernel, in a kpoold pod, works in the
    notebook's folder: the same volume at the same path in both, and a sandbox root."""
    objs = all_objects()
    serve_pod = objs[("Deployment", "kpool-serve")]["spec"]["template"]["spec"]
    command = serve_pod["containers"][0]["command"]
    root = command[command.index("--root") + 1]
    ds_pod = objs[("Deployment", "kpool")]["spec"]["template"]["spec"]
    kpoold = next(c for c in ds_pod["containers"] if c["name"] == "kpoold")

    def volume_at(pod, container, path):
        mount = next(m for m in container["volumeMounts"] if m["mountPath"] == path)
        return next(v for v in pod["volumes"] if v["name"] == mount["name"])

    served = volume_at(serve_pod, serve_pod["containers"][0], root)
    assert volume_at(ds_pod, kpoold, root) == served
    config = tomllib.loads(objs[("ConfigMap", "kpool-config")]["data"]["kpool.toml"].replace("${POD_IP}", "10.0.0.1"))
    for name, pool in config["pools"].items():
        if pool.get("isolation") == "sandbox":
            assert root in pool["sandbox"]["roots"], name
    notebooks = objs[("ConfigMap", served["configMap"]["name"])]["data"]
    for name, text in notebooks.items():
        nbformat.validate(nbformat.reads(text, as_version=4))


def test_the_network_policy_lets_only_kpool_clients_reach_the_control_and_kernel_ports():
    objs = all_objects()
    policy = objs[("NetworkPolicy", "kpool")]["spec"]
    ds = objs[("Deployment", "kpool")]
    assert policy["podSelector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert policy["policyTypes"] == ["Ingress"]
    ports = {}
    for rule in policy["ingress"]:
        assert rule["from"], "a rule without `from` lets everyone in"
        for p in rule["ports"]:
            ports[p["port"]] = (p.get("endPort", p["port"]), rule["from"])
    kpoold = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "kpoold")
    assert {p["containerPort"] for p in kpoold["ports"]} <= set(ports)
    # The kernels' ports: the pool's range (kpoold's default, above the ephemeral range).
    assert ports[61000][0] == 65535
    serve_labels = objs[("Deployment", "kpool-serve")]["spec"]["template"]["metadata"]["labels"]
    control_from = ports[5555][1]
    assert any(f.get("podSelector", {}).get("matchLabels", {}).items() <= serve_labels.items()
               and "namespaceSelector" not in f for f in control_from)
    metrics_from = ports[9464][1]
    assert metrics_from != control_from and all(f["podSelector"]["matchLabels"] for f in metrics_from)


def test_every_manifest_parses_and_uses_known_fields():
    objs = all_objects()
    assert {kind for kind, _ in objs} == set(SCHEMA)
    namespace = objs[("Namespace", "kpool")]["metadata"]["name"]
    for (kind, _), obj in objs.items():
        assert set(obj) <= SCHEMA[kind], (kind, set(obj) - SCHEMA[kind])
        assert obj["apiVersion"] == API[kind]
        assert set(obj["metadata"]) <= {"name", "namespace", "labels"}
        if kind != "Namespace":
            assert obj["metadata"]["namespace"] == namespace
    for pod in pod_specs():
        assert set(pod) <= POD_SPEC, set(pod) - POD_SPEC
        assert set(pod["securityContext"]) <= POD_SECURITY
        assert pod["securityContext"]["runAsNonRoot"] is True
        for c in pod["containers"] + pod.get("initContainers", []):
            assert set(c) <= CONTAINER, set(c) - CONTAINER
            assert set(c["securityContext"]) <= CONTAINER_SECURITY
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            for probe in ("readinessProbe", "livenessProbe"):
                if probe in c:
                    assert set(c[probe]) <= PROBE
                    assert c[probe].get("exec", {}).get("command") == ["kpool", "ping"] or \
                        c[probe]["httpGet"]["path"] == "/v1/health"


def test_kpool_serve_fronts_the_daemons_with_a_key_they_allow():
    objs = all_objects()
    deploy, svc = objs[("Deployment", "kpool-serve")], objs[("Service", "kpool-serve")]
    secret = objs[("Secret", "kpool-serve")]
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert deploy["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    pod = deploy["spec"]["template"]["spec"]
    serve = pod["containers"][0]
    assert serve["command"][:2] == ["kpool", "serve"]
    listen = serve["command"][serve["command"].index("--listen") + 1]
    assert not listen.startswith("127.") and "--token-file" in serve["command"]  # off loopback: a token
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= {p["name"] for p in serve["ports"]}
    env = {e["name"]: e for e in serve["env"]}
    assert env["KPOOL_ENDPOINT"]["value"].startswith("dns:" + objs[("Service", "kpool")]["metadata"]["name"] + ".")
    assert env["KPOOL_SERVER_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "kpool-curve"
    volumes = {v["name"]: v for v in pod["volumes"]}
    for m in serve["volumeMounts"]:
        assert m["name"] in volumes
    assert volumes["serve-secret"]["secret"]["secretName"] == secret["metadata"]["name"]
    assert {"serve.key", "token"} <= set(secret["stringData"])
    # The daemons let it in: its public key is in curve_allowed_keys, with a comment saying whose.
    config = objs[("ConfigMap", "kpool-config")]["data"]["kpool.toml"]
    assert any("kpool serve" in line and '"' in line for line in config.splitlines()
               if line.strip().startswith('"'))


def test_names_labels_ports_volumes_and_keys_agree():
    objs = objects()
    ds, svc = objs["Deployment"], objs["Service"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["clusterIP"] == "None"  # headless: one A record per daemon
    pod = ds["spec"]["template"]["spec"]
    kpoold = next(c for c in pod["containers"] if c["name"] == "kpoold")
    port_names = {p["name"] for p in kpoold["ports"]}
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= port_names
    volumes = {v["name"]: v for v in pod["volumes"]}
    for c in pod["containers"] + pod["initContainers"]:
        for m in c.get("volumeMounts", []):
            assert m["name"] in volumes
    assert volumes["config"]["configMap"]["name"] == objs["ConfigMap"]["metadata"]["name"]
    secret = objs["Secret"]
    assert volumes["secret"]["secret"]["secretName"] == secret["metadata"]["name"]
    for env in kpoold["env"]:
        ref = env.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"]
    config = objs["ConfigMap"]["data"]["kpool.toml"]
    assert "/var/run/kpool-keys/server.key" in config
    assert any(m["mountPath"] == "/var/run/kpool-keys" for m in kpoold["volumeMounts"])
    assert {"server.key", "probe.key"} <= set(secret["stringData"])


def test_the_configmap_config_is_valid_for_kpoold(tmp_path):
    config = objects()["ConfigMap"]["data"]["kpool.toml"]
    path = tmp_path / "kpool.toml"
    path.write_text(config)
    env = dict(os.environ, POD_IP="10.1.2.3")
    ok = subprocess.run([KPOOLD, "--check-config", str(path)], env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # Without the downward API's POD_IP the config says which variable is missing, and where.
    env.pop("POD_IP")
    bad = subprocess.run([KPOOLD, "--check-config", str(path)], env=env, capture_output=True, text=True)
    assert bad.returncode == 2
    assert "POD_IP" in bad.stderr and "kpool.toml:" in bad.stderr


def test_a_sandboxed_pool_gets_the_pod_settings_it_needs():
    """A sandbox makes user, pid and mount namespaces and mounts a /proc of its own, which the
    runtime's default seccomp and AppArmor profiles and a masked /proc refuse
    (../shared/notes/sandbox-facts.md, pitfall 8): the kpoold pods that run sandboxed pools say so."""
    import tomllib
    config = tomllib.loads(objects()["ConfigMap"]["data"]["kpool.toml"])
    assert any(p.get("isolation") == "sandbox" for p in config["pools"].values())
    pod = objects()["Deployment"]["spec"]["template"]["spec"]
    assert pod["hostUsers"] is False
    kpoold = next(c for c in pod["containers"] if c["name"] == "kpoold")
    security = kpoold["securityContext"]
    assert security["procMount"] == "Unmasked"
    assert security["seccompProfile"] == {"type": "Unconfined"}
    assert security["appArmorProfile"] == {"type": "Unconfined"}
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"] == {"drop": ["ALL"]}
