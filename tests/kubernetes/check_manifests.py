"""The Kubernetes manifests (deploy/kubernetes, rendered by `kubectl kustomize`, and
examples/kubernetes) against Kubernetes 1.32's schemas (kubernetes-validate, offline, strict),
and what the schemas cannot say: no DaemonSet takes a GPU, zeusd's socket is where the training
pods look for it, the ServiceMonitor honors the exporter's labels, the overlay changes what it
says. CRDs without a bundled schema (PyTorchJob, TrainJob, ServiceMonitor) have their pod parts
validated as core objects. Usage: check_manifests.py SOURCE_DIR. Exit 0 passed, 1 failed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate as kv
import yaml

K8S_VERSION = "1.32.0"
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)


def validate(doc: dict, where: str) -> None:
    try:
        kv.validate(doc, K8S_VERSION, strict=True)
    except kv.ValidationError as e:
        failures.append(f"{where}: {e.message} at {list(e.path)}")


def render(directory: Path) -> list[dict]:
    out = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True,
                         text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs: list[dict], kind: str, name: str | None = None) -> list[dict]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def no_gpu_requested(pod_spec: dict, where: str) -> None:
    for c in pod_spec.get("containers", []):
        resources = c.get("resources", {})
        for part in ("requests", "limits"):
            check("nvidia.com/gpu" not in resources.get(part, {}),
                  f"{where}: {c['name']} {part} nvidia.com/gpu (it would take a GPU from the jobs)")


def socket_dir(args: list[str]) -> str:
    path = next(a.split("=", 1)[1] for a in args if a.startswith("--socket-path="))
    return path.rsplit("/", 1)[0]


def check_services(docs: list[dict], where: str, socket_host_dir: str) -> None:
    for d in docs:
        if d["kind"] != "ServiceMonitor":
            validate(d, f"{where}: {d['kind']}/{d['metadata']['name']}")
    for ds in by_kind(docs, "DaemonSet"):
        no_gpu_requested(ds["spec"]["template"]["spec"], f"{where}: {ds['metadata']['name']}")
    zeusd = by_kind(docs, "DaemonSet", "zeusd")
    check(len(zeusd) == 1, f"{where}: one zeusd DaemonSet")
    spec = zeusd[0]["spec"]["template"]["spec"]
    c = spec["containers"][0]
    check(c.get("securityContext", {}).get("privileged") is True, f"{where}: zeusd privileged")
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == socket_dir(c["args"]))
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    check(volume.get("hostPath", {}).get("path") == socket_host_dir,
          f"{where}: zeusd's socket directory is the host's {socket_host_dir}, not {volume}")
    exporter = by_kind(docs, "DaemonSet", "zeus-exporter")[0]
    for ds in (zeusd[0], exporter):
        name = ds["metadata"]["name"]
        dspec = ds["spec"]["template"]["spec"]
        dc = dspec["containers"][0]
        kubelet = next(
            (a.split("=", 1)[1] for a in dc["args"] if a.startswith("--kubelet-socket=")), "")
        kmount = next((m for m in dc.get("volumeMounts", [])
                       if kubelet.startswith(m["mountPath"] + "/")), None)
        check(kmount is not None and kmount.get("readOnly") is True,
              f"{where}: {name} reads the kubelet's socket {kubelet!r} from a read-only mount")
        kvolume = next(v for v in dspec["volumes"] if v["name"] == kmount["name"])
        check(kvolume.get("hostPath", {}).get("path") == kmount["mountPath"],
              f"{where}: {name}'s kubelet mount is the host's {kmount['mountPath']}")
    # zeusd sees pods' pids (leases that survive its restart, a pod named by its cgroup) and
    # reads the kubelet's allocations from a read-only mount of the host's directory.
    check(spec.get("hostPID") is True, f"{where}: zeusd runs with hostPID: true")
    checkpoint = next((a.split("=", 1)[1] for a in c["args"]
                       if a.startswith("--kubelet-device-checkpoint=")), "")
    cmount = next((m for m in c.get("volumeMounts", [])
                   if checkpoint.startswith(m["mountPath"] + "/")), None)
    check(cmount is not None and cmount.get("readOnly") is True,
          f"{where}: zeusd reads the device checkpoint {checkpoint!r} from a read-only mount")
    if cmount is not None:
        cvolume = next(v for v in spec["volumes"] if v["name"] == cmount["name"])
        check(cvolume.get("hostPath", {}).get("path") == cmount["mountPath"],
              f"{where}: zeusd's device-plugins mount is the host's {cmount['mountPath']}")
    ports = {p["name"]: p["containerPort"]
             for p in exporter["spec"]["template"]["spec"]["containers"][0]["ports"]}
    service = by_kind(docs, "Service", "zeus-exporter")[0]
    check(any(p["name"] == "metrics" and p["targetPort"] in ("metrics", ports.get("metrics"))
              for p in service["spec"]["ports"]), f"{where}: the Service reaches metrics")
    monitors = by_kind(docs, "ServiceMonitor")
    check(len(monitors) == 1, f"{where}: one ServiceMonitor")
    sm = monitors[0]["spec"]
    labels = service["metadata"].get("labels", {})
    check(all(labels.get(k) == v for k, v in sm["selector"]["matchLabels"].items()),
          f"{where}: the ServiceMonitor selects the exporter's Service")
    for e in sm["endpoints"]:
        check(e.get("honorLabels") is True,
              f"{where}: honorLabels (else pod/namespace/container become exported_*)")
        check(e.get("port") in {p["name"] for p in service["spec"]["ports"]},
              f"{where}: the ServiceMonitor's port is the Service's")


def check_metrics_token(docs: list[dict]) -> None:
    """The overlay's token: the exporter reads it from a Secret mounted 0400 (it refuses a file
    others may read) and the ServiceMonitor sends that Secret's key."""
    spec = by_kind(docs, "DaemonSet", "zeus-exporter")[0]["spec"]["template"]["spec"]
    c = spec["containers"][0]
    path = next((a.split("=", 1)[1] for a in c["args"]
                 if a.startswith("--metrics-token-file=")), "")
    mount = next((m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/")), None)
    check(mount is not None, "overlay: the exporter's --metrics-token-file is in a mount")
    if mount is None:
        return
    secret = next(v for v in spec["volumes"] if v["name"] == mount["name"]).get("secret", {})
    check(secret.get("defaultMode", 0o644) & 0o077 == 0,
          f"overlay: the token's Secret is mounted for its owner only, not {secret}")
    key = path.rsplit("/", 1)[1]
    auth = by_kind(docs, "ServiceMonitor")[0]["spec"]["endpoints"][0].get("authorization", {})
    check(auth.get("type") == "Bearer" and auth.get("credentials") == {
        "name": secret.get("secretName"), "key": key},
          f"overlay: the ServiceMonitor sends the exporter's token ({auth})")


def check_training_pod(spec: dict, where: str, socket_host_dir: str) -> None:
    validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
              "template": {"spec": spec}}, where)
    for c in spec["containers"]:
        check(c["command"][:2] == ["zeus", "run"], f"{where}: runs zeus run")
        check(not c.get("securityContext", {}).get("privileged"), f"{where}: not privileged")
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        sock = env.get("ZEUSD_SOCK_PATH", "")
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        name = mounts.get(sock.rsplit("/", 1)[0])
        volume = next((v for v in spec.get("volumes", []) if v["name"] == name), None)
        check(volume is not None and volume["hostPath"]["path"] == socket_host_dir,
              f"{where}: ZEUSD_SOCK_PATH {sock} is in a mount of the host's {socket_host_dir}")


def main(source: Path) -> int:
    base = render(source / "deploy/kubernetes/base")
    check_services(base, "base", "/run/zeusd")
    overlay = render(source / "deploy/kubernetes/overlays/gpu-nodes")
    check_services(overlay, "overlays/gpu-nodes", "/var/run/zeus")
    for ds in by_kind(overlay, "DaemonSet"):
        spec = ds["spec"]["template"]["spec"]
        check(spec["containers"][0]["image"] == "registry.example.com/ml/zeus-cpp:0.1.0",
              f"overlay: {ds['metadata']['name']}'s image")
        check(spec.get("nodeSelector") == {"nvidia.com/gpu.present": "true"},
              f"overlay: {ds['metadata']['name']}'s node selector")
        check(spec["containers"][0]["resources"]["limits"]["memory"] == "256Mi",
              f"overlay: {ds['metadata']['name']}'s resources")
    check_metrics_token(overlay)
    examples = source / "examples/kubernetes"
    job = yaml.safe_load((examples / "pytorchjob.yaml").read_text())
    check(job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PyTorchJob", "PyTorchJob kind")
    for role, replica in job["spec"]["pytorchReplicaSpecs"].items():
        check_training_pod(replica["template"]["spec"], f"PyTorchJob {role}", "/run/zeusd")
    train = yaml.safe_load((examples / "trainjob.yaml").read_text())
    check(train["kind"] == "TrainJob", "TrainJob kind")
    trainer = train["spec"]["trainer"]
    override = train["spec"]["podSpecOverrides"][0]
    check_training_pod({"containers": [{"name": "node", "image": trainer["image"],
                                        "command": trainer["command"], "env": trainer["env"],
                                        "resources": trainer["resourcesPerNode"],
                                        "volumeMounts": override["containers"][0]["volumeMounts"]}],
                        "volumes": override["volumes"]}, "TrainJob node", "/run/zeusd")
    for f in failures:
        print("FAIL", f)
    print(f"check_manifests: {len(failures)} failure(s) against Kubernetes {K8S_VERSION}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
