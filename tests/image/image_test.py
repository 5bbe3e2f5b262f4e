"""The meshlife image run as `meshlife install gatekeeper`'s Deployment runs it (tests/image/run.sh).

Usage: image_test.py IMAGE ACTION_IMAGE

Every fact of the run comes from the install the image itself prints: the container's arguments,
environment, user, mounts and the Secret's files. Docker then runs the image the way the kubelet
would (read-only root, /cache on a tmpfs, all capabilities dropped, no privilege escalation) and
this script talks to it from the host, as Gatekeeper and the kubelet do:
  - /healthz, /readyz and /metrics on the health port;
  - ProviderRequests over mTLS (meshlife's CA from the Provider's caBundle, a client certificate
    from a stand-in for Gatekeeper's CA), whose verdicts must be those `meshlife check` gives in
    the same image on a mounted folder holding the same objects; a client without a certificate
    is refused;
  - `docker stop` (SIGTERM) while requests run: every request the server accepted is answered,
    and the container exits 0 before the grace period ends.
Then the GitHub Action's image (ACTION_IMAGE, the one action.yml names) is started as a runner
starts a container action: in a workspace mounted at /github/workspace, every input of
action.yml an INPUT_* variable (its default when the workflow gives none), GITHUB_OUTPUT and
GITHUB_STEP_SUMMARY files under /github/file_commands.
Prints a line per check; exits 1 when one fails.
"""

import base64
import http.client
import json
import os
import pathlib
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
failures = []


def check(name, ok, detail=""):
    print(f"  {'ok  ' if ok else 'FAIL'}  {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        failures.append(name)


def docker(*args, capture=True, check_rc=True, input_text=None):
    result = subprocess.run(["docker", *args], capture_output=capture, text=True, input=input_text)
    if check_rc and result.returncode != 0:
        raise SystemExit(f"docker {' '.join(args[:3])} ... exited {result.returncode}: {result.stderr.strip()}")
    return result


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def install_objects(image):
    text = docker("run", "--rm", "--read-only", "--cap-drop", "ALL", image, "install", "gatekeeper").stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def one(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    if len(found) != 1:
        raise SystemExit(f"the install prints {len(found)} {kind} {name or ''}, expected one")
    return found[0]


def mtls_context(ca_file, cert=None, key=None):
    context = ssl.create_default_context(cafile=ca_file)
    if cert:
        context.load_cert_chain(cert, key)
    return context


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    """Connects to 127.0.0.1:port but verifies the certificate for the Service's name."""

    def __init__(self, port, server_name, context):
        super().__init__(server_name, port, context=context, timeout=30)
        self.local_port = port

    def connect(self):
        raw = socket.create_connection(("127.0.0.1", self.local_port), timeout=30)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


def provider_request(port, server_name, context, keys, path):
    body = json.dumps({
        "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
        "kind": "ProviderRequest",
        "request": {"keys": keys},
    })
    connection = PinnedHTTPSConnection(port, server_name, context)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json", "Connection": "close"})
        response = connection.getresponse()
        text = response.read()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, {"text": text[:300].decode(errors="replace")}
    finally:
        connection.close()


def workload_objects():
    """Each example object alone, with the module input a Gatekeeper key carries for it."""
    objects = []
    for path in sorted((REPO / "examples").rglob("*.yaml")):
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue  # the examples of broken input
        for number, document in enumerate(documents, 1):
            if not isinstance(document, dict) or document.get("kind") in (None, "Namespace", "List"):
                continue
            if "apiVersion" not in document or "metadata" not in document:
                continue
            label = f"{path.relative_to(REPO)}#{number}"
            objects.append((label, document))
    return objects


def main():
    image = sys.argv[1]
    work = pathlib.Path(tempfile.mkdtemp(prefix="meshlife-image-"))
    work.chmod(0o755)
    size = int(docker("image", "inspect", "--format", "{{.Size}}", image).stdout)
    print(f"{image}: {size / 1024 / 1024:.1f} MiB")
    readme_figures(size)

    objects = install_objects(image)
    deployment = one(objects, "Deployment", "meshlife-provider")
    secret = one(objects, "Secret", "meshlife-provider-tls")
    provider = one(objects, "Provider")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    user = pod["securityContext"]["runAsUser"]
    group = pod["securityContext"]["runAsGroup"]
    check("the install names this image", container["image"] == image, container["image"])
    check("the Deployment drops every capability and mounts the root read-only",
          container["securityContext"]["capabilities"]["drop"] == ["ALL"]
          and container["securityContext"]["readOnlyRootFilesystem"] is True)
    service = one(objects, "Service")
    server_name = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"

    # The Secret's files where the Deployment mounts them; Gatekeeper's webhook CA stands in
    # for the gatekeeper-webhook-server-cert Secret, whose ca.crt client certificates chain to.
    meshlife_ca = work / "meshlife-ca.crt"
    meshlife_ca.write_bytes(base64.b64decode(provider["spec"]["caBundle"]))
    gatekeeper = work / "gatekeeper"
    gatekeeper.mkdir()
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=gatekeeper-ca", "-days", "1", "-keyout", str(gatekeeper / "ca.key"),
            "-out", str(gatekeeper / "ca.crt"))
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=gatekeeper-webhook-service.gatekeeper-system.svc",
            "-keyout", str(gatekeeper / "client.key"), "-out", str(gatekeeper / "client.csr"))
    # A v3 certificate for client authentication, as Gatekeeper's is: webpki refuses v1.
    (gatekeeper / "client.ext").write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=clientAuth\nsubjectAltName=DNS:gatekeeper-webhook-service.gatekeeper-system.svc\n")
    openssl("x509", "-req", "-in", str(gatekeeper / "client.csr"), "-CA", str(gatekeeper / "ca.crt"),
            "-CAkey", str(gatekeeper / "ca.key"), "-CAcreateserial", "-days", "1",
            "-extfile", str(gatekeeper / "client.ext"), "-out", str(gatekeeper / "client.crt"))
    mounts = []
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            limit = volume["emptyDir"].get("sizeLimit", "64Mi").replace("Mi", "m")
            mounts += ["--tmpfs", f"{mount['mountPath']}:rw,size={limit}"]
            continue
        folder = work / "volumes" / mount["name"]
        folder.mkdir(parents=True)
        source = volume["secret"]["secretName"]
        if source == secret["metadata"]["name"]:
            files = {key: value.encode() for key, value in secret["stringData"].items()}
        else:
            files = {"ca.crt": (gatekeeper / "ca.crt").read_bytes()}
        for item in volume["secret"].get("items") or [{"key": key, "path": key} for key in files]:
            (folder / item["path"]).write_bytes(files[item["key"]])
            (folder / item["path"]).chmod(0o644)
        folder.chmod(0o755)
        mounts += ["-v", f"{folder}:{mount['mountPath']}:ro"]
    environment = []
    for variable in container.get("env", []):
        environment += ["-e", f"{variable['name']}={variable['value']}"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    name = f"meshlife-image-test-{os.getpid()}"
    memory = container["resources"]["limits"]["memory"].replace("Mi", "m").replace("Gi", "g")
    docker("run", "-d", "--name", name, "--read-only", "--user", f"{user}:{group}",
           "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--memory", memory,
           "-p", f"127.0.0.1::{ports['https']}", "-p", f"127.0.0.1::{ports['health']}",
           *mounts, *environment, image, *container["args"])
    try:
        path = urllib.parse.urlsplit(provider["spec"]["url"]).path
        run_checks(name, ports, server_name, path, meshlife_ca, gatekeeper, work, image, user, group,
                   pod["terminationGracePeriodSeconds"])
        action_checks(sys.argv[2], work)
    finally:
        docker("rm", "-f", name, check_rc=False)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"FAIL: {len(failures)} checks failed: {', '.join(failures)}")
        sys.exit(1)
    print("PASS: the image runs as the install's Deployment runs it")


def run_action(action_image, workspace, commands, given):
    """The action image run as the runner runs it; returns (exit code, stdout, outputs, summary)."""
    action = yaml.safe_load((REPO / "action.yml").read_text())
    environment = []
    for name, spec in action["inputs"].items():
        value = given.get(name, spec.get("default", ""))
        environment += ["-e", f"INPUT_{name.upper()}={value}"]
    for file in ("set_output", "step_summary"):
        (commands / file).write_text("")
        (commands / file).chmod(0o666)
    result = docker("run", "--rm", "--workdir", "/github/workspace",
                    "-v", f"{workspace}:/github/workspace", "-v", f"{commands}:/github/file_commands",
                    "-e", "GITHUB_WORKSPACE=/github/workspace", "-e", "GITHUB_ACTIONS=true",
                    "-e", "CI=true", "-e", "GITHUB_OUTPUT=/github/file_commands/set_output",
                    "-e", "GITHUB_STEP_SUMMARY=/github/file_commands/step_summary",
                    *environment, action_image, *action["runs"].get("args", []), check_rc=False)
    outputs = dict(line.split("=", 1) for line in (commands / "set_output").read_text().splitlines())
    return result.returncode, result.stdout, outputs, (commands / "step_summary").read_text()


def action_checks(action_image, work):
    """action.yml's image, run as a GitHub runner runs a container action."""
    action = yaml.safe_load((REPO / "action.yml").read_text())
    check("action.yml names the action image built here",
          action["runs"]["image"] == f"docker://{action_image}", action["runs"]["image"])
    workspace = work / "workspace"
    (workspace / "deploy").mkdir(parents=True)
    for example in ("job-classic-no-exit.yaml", "deployment-no-hold.yaml"):
        shutil.copy(REPO / "examples" / "istio" / example, workspace / "deploy" / example)
    (workspace / ".meshlife.yaml").write_text("failOn: error\n")
    commands = work / "file_commands"
    commands.mkdir()
    code, stdout, outputs, summary = run_action(action_image, workspace, commands, {"paths": "deploy"})
    sarif_path = workspace / "meshlife.sarif"
    sarif = json.loads(sarif_path.read_text()) if sarif_path.exists() else {"runs": [{"results": []}]}
    results = sarif["runs"][0]["results"]
    uris = {result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for result in results}
    check("the action fails the step on an error finding (exit 1), under the repository's config",
          code == 1, f"exit {code}: {stdout[-300:]}")
    check("the action annotates the pull request (workflow commands naming the file)",
          "::error file=deploy/job-classic-no-exit.yaml" in stdout, stdout[:300])
    check("the action writes SARIF into the workspace, files relative to it",
          bool(results) and uris <= {"deploy/job-classic-no-exit.yaml", "deploy/deployment-no-hold.yaml"},
          str(uris))
    check("the action's outputs and job summary say the outcome",
          outputs.get("exit-code") == "1" and outputs.get("findings") == str(len(results))
          and outputs.get("sarif-file") == "meshlife.sarif" and "### meshlife" in summary,
          f"{outputs} {summary!r}")
    code, stdout, outputs, summary = run_action(
        action_image, workspace, commands, {"paths": "deploy missing/", "fail-on": "none"})
    check("an input error is exit 2 in the step and its outputs", code == 2
          and outputs.get("exit-code") == "2", f"exit {code}, {outputs}")


def readme_figures(size):
    """The README's figures for the image are the measured ones: size within 10 %, and the
    SBOM's component count exactly."""
    import re
    readme = (REPO / "README.md").read_text()
    quoted = re.search(r"It is (\d+) MiB", readme)
    mib = size / 1024 / 1024
    check("the README's image size is the image's", bool(quoted) and abs(int(quoted.group(1)) - mib) <= mib / 10,
          f"README {quoted.group(1) if quoted else 'says none'} MiB, measured {mib:.1f} MiB")
    sboms = sorted((REPO / "target" / "image").glob("meshlife-*.cdx.json"))
    components = len(json.loads(sboms[-1].read_text())["components"]) if sboms else None
    quoted = re.search(r"(\d+) components", readme)
    check("the README's SBOM component count is the SBOM's", bool(quoted) and int(quoted.group(1)) == components,
          f"README {quoted.group(1) if quoted else 'says none'}, {sboms[-1].name if sboms else 'no SBOM'} {components}")


def published(name, port):
    line = docker("port", name, f"{port}/tcp").stdout.splitlines()[0]
    return int(line.rsplit(":", 1)[1])


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return None, str(error)


def run_checks(name, ports, server_name, path, meshlife_ca, gatekeeper, work, image, user, group, grace):
    https, health = published(name, ports["https"]), published(name, ports["health"])
    started = time.monotonic()
    status = None
    while time.monotonic() - started < 30:
        status, _ = http_get(health, "/readyz")
        if status == 200:
            break
        time.sleep(0.2)
    logs = docker("logs", name, check_rc=False)
    check("/readyz answers 200 once the module is loaded", status == 200,
          f"after {time.monotonic() - started:.1f} s" if status == 200 else (logs.stdout + logs.stderr)[-600:])
    status, text = http_get(health, "/healthz")
    check("/healthz answers 200", status == 200)
    status, text = http_get(health, "/metrics")
    check("/metrics answers Prometheus text", status == 200 and "# TYPE meshlife_" in text,
          f"{len(text.splitlines())} lines")

    context = mtls_context(str(meshlife_ca), str(gatekeeper / "client.crt"), str(gatekeeper / "client.key"))
    objects = workload_objects()
    # Istio injection everywhere, so that most objects are judged meshed and have findings.
    parameters = {"kubernetesMinorVersion": 31, "istio": {"injectedNamespaces": ["*"]}}
    keys = [json.dumps({"review": {"object": obj}, "parameters": parameters}) for _, obj in objects]
    try:
        status, answer = provider_request(https, server_name, context, keys, path)
    except (OSError, http.client.HTTPException, ValueError) as error:
        logs = docker("logs", name, check_rc=False)
        status, answer = repr(error), {}
        print((logs.stdout + logs.stderr)[-800:])
    items = answer.get("response", {}).get("items", [])
    check("a ProviderRequest over mTLS is answered", status == 200 and len(items) == len(keys),
          f"HTTP {status}, {len(items)} items for {len(keys)} keys" + (f": {answer}" if not items else ""))
    served = {}
    for (label, _), item in zip(objects, items):
        served[label] = sorted(v["details"]["rule"] for v in item.get("value") or [])

    # The same objects, a file each, judged by `meshlife check` in the image on a mounted folder.
    folder = work / "objects"
    folder.mkdir()
    names = {}
    for index, (label, obj) in enumerate(objects):
        file = folder / f"{index:04d}.yaml"
        file.write_text(yaml.safe_dump(obj))
        names[f"/objects/{file.name}"] = label
    folder.chmod(0o755)
    for file in folder.iterdir():
        file.chmod(0o644)
    constraint = work / "constraint.yaml"
    constraint.write_text(yaml.safe_dump({
        "apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "MeshLifecycle",
        "metadata": {"name": "istio-everywhere"},
        "spec": {"enforcementAction": "warn", "parameters": parameters}}))
    constraint.chmod(0o644)
    result = docker("run", "--rm", "--read-only", "--user", f"{user}:{group}", "--cap-drop", "ALL",
                    "--tmpfs", "/cache", "-e", "XDG_CACHE_HOME=/cache", "-v", f"{folder}:/objects:ro",
                    "-v", f"{constraint}:/constraint.yaml:ro", image, "check", "-o", "json",
                    "--fail-on", "none", "--constraint", "/constraint.yaml", "/objects", check_rc=False)
    checked = {label: [] for label in names.values()}
    try:
        envelope = json.loads(result.stdout)
        for finding in envelope["findings"]:
            checked[names[finding["file"]]].append(finding["rule"])
        parsed = True
    except (ValueError, KeyError) as error:
        parsed = False
        check("meshlife check in the image on a mounted folder", False, f"{error}: {result.stderr[-400:]}")
    if parsed:
        checked = {label: sorted(rules) for label, rules in checked.items()}
        judged = sum(1 for rules in checked.values() if rules)
        check("meshlife check in the image on a mounted folder", result.returncode == 0,
              f"{len(checked)} objects, {judged} with findings, exit {result.returncode}")
        differing = [label for label in checked if checked[label] != served.get(label)]
        check("the provider's verdicts are meshlife check's", not differing,
              f"{len(checked)} objects agree" if not differing else
              "; ".join(f"{d}: check {checked[d]}, served {served.get(d)}" for d in differing[:5]))

    # Refused in TLS, or (Gatekeeper's protocol answers HTTP 200) a systemError and no verdict.
    try:
        status, answer = provider_request(https, server_name, mtls_context(str(meshlife_ca)), keys[:1], path)
        error = answer.get("response", {}).get("systemError", "")
        refused = not answer.get("response", {}).get("items") and "client certificate" in error
        outcome = f"HTTP {status}, systemError: {error}" if refused else f"answered HTTP {status}: {answer}"
    except (ssl.SSLError, ConnectionError, http.client.HTTPException, OSError) as error:
        refused, outcome = True, f"refused in TLS: {error!r}"
    check("a client without a certificate is refused", refused, outcome[:200])

    # SIGTERM while requests run: each request on its own connection, so that one the server
    # never accepted (refused at connect) is told apart from one it accepted and then lost.
    counts = {"answered": 0, "refused": 0, "lost": 0}
    lost = []
    lock = threading.Lock()
    stopping = threading.Event()

    def client():
        while not stopping.is_set():
            try:
                raw = socket.create_connection(("127.0.0.1", https), timeout=5)
            except OSError:
                with lock:
                    counts["refused"] += 1
                time.sleep(0.05)
                continue
            try:
                connection = PinnedHTTPSConnection(https, server_name, context)
                connection.sock = context.wrap_socket(raw, server_hostname=server_name)
            except (ssl.SSLError, OSError):
                # Docker's port proxy accepts for a container that no longer listens: no TLS
                # handshake means the server never had the request.
                raw.close()
                with lock:
                    counts["refused"] += 1
                time.sleep(0.05)
                continue
            try:
                body = json.dumps({"apiVersion": "externaldata.gatekeeper.sh/v1beta1",
                                   "kind": "ProviderRequest", "request": {"keys": keys[:8]}})
                connection.request("POST", path, body, {"Content-Type": "application/json", "Connection": "close"})
                response = connection.getresponse()
                answer = json.loads(response.read())
                ok = response.status == 200 and len(answer["response"]["items"]) == 8
                with lock:
                    counts["answered" if ok else "lost"] += 1
                    if not ok:
                        lost.append(f"HTTP {response.status}")
            except Exception as error:  # noqa: BLE001 - any failure after the handshake is a loss
                with lock:
                    counts["lost"] += 1
                    lost.append(repr(error)[:120])
            finally:
                connection.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(4)]
    stop_took = None
    try:
        for thread in threads:
            thread.start()
        time.sleep(2)
        # `docker stop` sends SIGTERM at once and waits; a second later the server must still
        # be answering (its drain delay), so the answers counted from then are after the signal.
        stopped = {}

        def stop():
            started = time.monotonic()
            docker("stop", "-t", str(grace), name)
            stopped["took"] = time.monotonic() - started

        stopper = threading.Thread(target=stop, daemon=True)
        stopper.start()
        time.sleep(1)
        a_second_after = counts["answered"]
        stopper.join(grace + 10)
        stop_took = stopped.get("took")
    finally:
        stopping.set()
        for thread in threads:
            thread.join(10)
    exit_code = int(docker("inspect", "--format", "{{.State.ExitCode}}", name).stdout)
    check("docker stop (SIGTERM) during requests loses none",
          counts["lost"] == 0 and counts["answered"] > a_second_after,
          f"{counts['answered']} answered ({counts['answered'] - a_second_after} from 1 s after "
          f"SIGTERM), {counts['refused']} refused before the server had them, "
          f"{counts['lost']} lost {lost[:3]}")
    stop_took = stop_took if stop_took is not None else float("inf")
    check("the container exits 0 within its grace period", exit_code == 0 and stop_took < grace,
          f"exit {exit_code} after {stop_took:.1f} s (grace {grace} s)")


if __name__ == "__main__":
    main()
