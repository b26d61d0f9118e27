#!/usr/bin/python3
"""The Kubernetes path without kubelet: a CRI client against a private containerd.

Its stubs are made at run time from the CRI descriptors compiled into the containerd binary:
containerd 1.6 is built with gogo/protobuf, which registers every .proto as a gzip'd
FileDescriptorProto in the binary's data (`fileDescriptor_<hash> = []byte{0x1f, 0x8b, ...}`). We
scan the binary for gzip headers, keep the one whose package is `runtime.v1`, drop its gogoproto
import and options (gogo's extensions change the Go code, not the wire format), and build message
classes and unary-call stubs from it with Debian's python3-protobuf and python3-grpcio. No .proto
file and no code generator is needed, and the client speaks exactly the API the binary serves.

    cri.py --containerd BIN --socket SOCK --handler NAME --image REF --work DIR
    cri.py --cleanup --containerd BIN --socket SOCK     (stop and remove every pod sandbox)

Prints one PASS/FAIL line per check, as the other parts of scripts/oci-harness do.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import zlib

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

CGROUP_PARENT = "/appd-oci-harness"  # --cgroup-parent
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # what Go's gzip writes, as gogo uses it


def cri_descriptor(binary):
    with open(binary, "rb") as f:
        data = f.read()
    at = 0
    while True:
        at = data.find(GZIP_HEADER, at)
        if at < 0:
            raise SystemExit("cri.py: no runtime.v1 descriptor found in %s" % binary)
        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[at:at + 4 << 20])
            proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
        except Exception:
            proto = None
        if proto is not None and proto.package == "runtime.v1" and proto.service:
            return proto
        at += 1


def strip_gogo(proto):
    del proto.dependency[:]
    proto.ClearField("options")
    def messages(list_):
        for message in list_:
            message.ClearField("options")
            for field in message.field:
                field.ClearField("options")
            messages(message.nested_type)
    messages(proto.message_type)
    return proto


class CRI:
    def __init__(self, binary, socket):
        proto = strip_gogo(cri_descriptor(binary))
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        factory = message_factory.MessageFactory(pool)
        self.types = {}
        channel = grpc.insecure_channel("unix://" + socket)
        for service in proto.service:
            for method in service.method:
                request = factory.GetPrototype(pool.FindMessageTypeByName(method.input_type.lstrip(".")))
                response = factory.GetPrototype(pool.FindMessageTypeByName(method.output_type.lstrip(".")))
                self.types[method.input_type.split(".")[-1]] = request
                call = channel.unary_unary("/runtime.v1.%s/%s" % (service.name, method.name),
                                           request_serializer=request.SerializeToString,
                                           response_deserializer=response.FromString)
                setattr(self, method.name, self._bind(call, request))
        self.factory, self.pool = factory, pool

    @staticmethod
    def _bind(call, request):
        def invoke(deadline=60, **fields):
            message = request()
            fill(message, fields)
            return call(message, timeout=deadline)
        return invoke


def fill(message, values):
    """Sets nested fields from a dict: maps, repeated scalars and sub-messages."""
    for key, value in values.items():
        field = message.DESCRIPTOR.fields_by_name[key]
        target = getattr(message, key)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for k, v in value.items():
                target[k] = v
        elif field.label == field.LABEL_REPEATED:
            for item in value:
                if isinstance(item, dict):
                    fill(target.add(), item)
                else:
                    target.append(item)
        elif isinstance(value, dict):
            fill(target, value)
        else:
            setattr(message, key, value)


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, name, expected, actual):
        ok = expected == actual
        self.failed += 0 if ok else 1
        print("%s cri: %s (expected %r, got %r)" % ("PASS" if ok else "FAIL", name, expected, actual), flush=True)
        return ok

    def true(self, name, ok, detail):
        self.failed += 0 if ok else 1
        print("%s cri: %s (%s)" % ("PASS" if ok else "FAIL", name, detail), flush=True)
        return ok


def pod_config(name, work, dns=None):
    logs = os.path.join(work, "logs", name)
    os.makedirs(logs, exist_ok=True)
    config = {
        "metadata": {"name": name, "uid": name + "-uid", "namespace": "appd-harness", "attempt": 0},
        "hostname": name,
        "log_directory": logs,
        "linux": {"cgroup_parent": CGROUP_PARENT, "security_context": {"namespace_options": {}}},
    }
    if dns:
        # A pod's dnsConfig as kubelet passes it: the cluster DNS service, its search domains.
        config["dns_config"] = {"servers": [dns], "searches": [DNS_SEARCH], "options": ["ndots:5"]}
    return config


DNS_SEARCH = "appd-harness.svc.cluster.local"
DNS_NAME, DNS_ADDRESS = "web", "10.213.0.250"  # web.appd-harness.svc.cluster.local


class PodDNS:
    """scripts/oci/dns.py in a pod's network namespace (the harness's bridge has no host
    address): the DNS server a dnsConfig names, as a cluster's DNS service would be."""

    def __init__(self, cri, pod):
        # A map field, read as its entries (strip_gogo dropped the map_entry option).
        entries = {e.key: e.value for e in cri.PodSandboxStatus(pod_sandbox_id=pod, verbose=True).info}
        info = json.loads(entries.get("info", "{}"))
        namespaces = info.get("runtimeSpec", {}).get("linux", {}).get("namespaces", [])
        path = next((n.get("path") for n in namespaces if n.get("type") == "network"), None)
        self.address = cri.PodSandboxStatus(pod_sandbox_id=pod).status.network.ip
        self.process = None
        if path:
            self.process = subprocess.Popen(
                ["nsenter", "--net=" + path, "/usr/bin/python3", os.path.join(os.path.dirname(__file__), "dns.py"),
                 "%s.%s=%s" % (DNS_NAME, DNS_SEARCH, DNS_ADDRESS)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)

    def stop(self):
        if self.process:
            self.process.kill()
            self.process.wait()


def spin_stats(cri, handler, image, work, c, name):
    """ContainerStats' CPU use of one busybox loop (about a second of CPU) in a pod of
    `handler`: the container's own, not the host's (a hybrid host keeps cpuacct apart)."""
    config = pod_config(name, work)
    pod = cri.RunPodSandbox(config=config, runtime_handler=handler).pod_sandbox_id
    try:
        created = cri.CreateContainer(
            pod_sandbox_id=pod, sandbox_config=config,
            config=container_config(name, image, ["sh", "-c", "for i in $(seq 500000); do :; done; echo spun; sleep 60"])
        ).container_id
        cri.StartContainer(container_id=created)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = cri.ContainerStatus(container_id=created).status
            try:
                with open(status.log_path) as f:
                    if "spun" in f.read():
                        break
            except OSError:
                pass
            time.sleep(0.3)
        stats = cri.ContainerStats(container_id=created).stats
        cri.StopContainer(container_id=created, timeout=0)
        return stats.cpu.usage_core_nano_seconds.value, stats.memory.working_set_bytes.value
    finally:
        cri.StopPodSandbox(pod_sandbox_id=pod)
        cri.RemovePodSandbox(pod_sandbox_id=pod)


def cgroup_file(container, v1, v2):
    """The file `v1` (in its v1 hierarchy) or `v2` (unified) of the container's cgroup: the
    folder named for its id (cgroupfs) or cri-containerd-ID.scope (systemd's driver)."""
    roots = ["/sys/fs/cgroup/" + v1.split(".")[0], "/sys/fs/cgroup"]
    for root, name in ((roots[0], v1), (roots[1], v2)):
        for top, folders, _ in os.walk(root):
            for folder in folders:
                if folder == container or folder == "cri-containerd-%s.scope" % container:
                    path = os.path.join(top, folder, name)
                    if os.path.exists(path):
                        return path
    return None


def read_file(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, TypeError) as error:
        return str(error)


def container_config(name, image, args, memory=0):
    config = {
        "metadata": {"name": name, "attempt": 0},
        "image": {"image": image},
        "command": args,
        "log_path": name + ".log",
    }
    if memory:
        config["linux"] = {"resources": {"memory_limit_in_bytes": memory}}
    return config


def wait_exit(cri, container, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = cri.ContainerStatus(container_id=container).status
        if status.state == 2:  # CONTAINER_EXITED
            return status
        time.sleep(0.2)
    return cri.ContainerStatus(container_id=container).status


def run(args):
    cri = CRI(args.containerd, args.socket)
    c = Checks()
    version = cri.Version(version="v1")
    c.check("Version answers runtime_api_version", "v1", version.runtime_api_version)
    started = []

    def sandbox(name, dns=None):
        config = pod_config(name, args.work, dns)
        pod = cri.RunPodSandbox(config=config, runtime_handler=args.handler).pod_sandbox_id
        started.append(pod)
        return pod, config

    def container(pod, config, name, command, memory=0):
        created = cri.CreateContainer(pod_sandbox_id=pod, config=container_config(name, args.image, command, memory),
                                      sandbox_config=config).container_id
        cri.StartContainer(container_id=created)
        return created

    server_pod, server_config = sandbox("server")
    status = cri.PodSandboxStatus(pod_sandbox_id=server_pod).status
    c.check("RunPodSandbox with handler %r: pod ready" % args.handler, 0, status.state)
    c.check("the pod's runtime handler", args.handler, status.runtime_handler)
    server_ip = status.network.ip
    c.true("the CNI bridge gave the pod an address", server_ip.startswith("10.213."), "ip %r" % server_ip)

    # Output, exit code, the CRI log file.
    first = container(server_pod, server_config, "exits", ["sh", "-c", "echo out-line; echo err-line >&2; exit 5"])
    status = wait_exit(cri, first, 30)
    c.check("ContainerStatus exit code", 5, status.exit_code)
    log_path = status.log_path
    try:
        with open(log_path) as f:
            lines = [line.rstrip("\n").split(" ", 3)[1:] for line in f]
    except OSError as error:
        lines = [str(error)]
    c.check("the CRI log file (stream, tag, text)",
            sorted([["stdout", "F", "out-line"], ["stderr", "F", "err-line"]]), sorted(lines))

    # The server, ExecSync and stats on a running container.
    server = container(server_pod, server_config, "server",
                       ["sh", "-c", "while :; do echo pong-from-server | nc -l -p 8080; done"])
    reply = cri.ExecSync(container_id=server, cmd=["echo", "exec-ok"], timeout=20)
    c.check("ExecSync stdout and exit code", (b"exec-ok\n", 0), (reply.stdout, reply.exit_code))
    reply = cri.ExecSync(container_id=server, cmd=["sh", "-c", "echo e >&2; exit 4"], timeout=20)
    c.check("ExecSync stderr and non-zero exit code", (b"e\n", 4), (reply.stderr, reply.exit_code))
    stats = cri.ContainerStats(container_id=server).stats
    c.true("ContainerStats: memory working set and cpu usage read from the container's cgroup",
           stats.memory.working_set_bytes.value > 0 and stats.cpu.usage_core_nano_seconds.value > 0,
           "working_set %d bytes, cpu %d ns" % (stats.memory.working_set_bytes.value,
                                                stats.cpu.usage_core_nano_seconds.value))

    # OOM: a memory limit the program exceeds.
    oom = container(server_pod, server_config, "oom", ["tail", "/dev/zero"], memory=32 << 20)
    status = wait_exit(cri, oom, 60)
    # The shim's TaskOOM and TaskExit events are two: under load the exit can be handled first
    # (reason "Error"), and the OOM event then sets "OOMKilled", as kubelet would read it later.
    # Waited for, bounded: an OOM event that never comes still fails.
    deadline = time.monotonic() + 10
    while status.reason != "OOMKilled" and time.monotonic() < deadline:
        time.sleep(0.2)
        status = cri.ContainerStatus(container_id=oom).status
    c.check("ContainerStatus of a container over its 32 MiB limit (reason, exit code)",
            ("OOMKilled", 137), (status.reason, status.exit_code))

    # Volumes as kubelet hands them: an emptyDir (a 0777 host folder) written by one container,
    # read by another through a read-only mount of the same folder (as a configMap is mounted).
    empty = os.path.join(args.work, "emptydir")
    os.makedirs(empty, exist_ok=True)
    os.chmod(empty, 0o777)
    volume_status = {}
    for name, command, readonly in [("writer", "echo shared > /cache/file && cat /cache/file", False),
                                    ("reader", "cat /cache/file; echo x > /cache/other || echo read-only", True)]:
        config = container_config(name, args.image, ["sh", "-c", command])
        config["mounts"] = [{"container_path": "/cache", "host_path": empty, "readonly": readonly}]
        created = cri.CreateContainer(pod_sandbox_id=server_pod, config=config,
                                      sandbox_config=server_config).container_id
        cri.StartContainer(container_id=created)
        status = wait_exit(cri, created, 30)
        try:
            with open(status.log_path) as f:
                volume_status[name] = [line.rstrip("\n").split(" ", 3)[-1] for line in f]
        except OSError as error:
            volume_status[name] = [str(error)]
    c.check("an emptyDir written by one container, read read-only by another",
            {"writer": ["shared"], "reader": ["shared", "read-only"]},
            {name: [line for line in lines if "Read-only" not in line] for name, lines in volume_status.items()})

    # The pod's DNS and hostname: a pod whose dnsConfig names a DNS server in another pod.
    dns_pod, _ = sandbox("dns")
    dns = PodDNS(cri, dns_pod)
    try:
        named_pod, named_config = sandbox("named", dns=dns.address)
        named = container(named_pod, named_config, "named",
                          ["sh", "-c", "busybox nslookup %s; busybox hostname; cat /etc/resolv.conf" % DNS_NAME])
        status = wait_exit(cri, named, 30)
        try:
            with open(status.log_path) as f:
                text = [line.rstrip("\n").split(" ", 3)[-1] for line in f]
        except OSError as error:
            text = [str(error)]
        c.true("a name resolved through the pod's dnsConfig server; the pod's hostname and resolv.conf",
               any(DNS_ADDRESS in line for line in text) and "named" in text
               and "nameserver " + dns.address in text and "search " + DNS_SEARCH in text, repr(text))
    finally:
        dns.stop()

    # Stats as runc gives them: the same loop under containerd's runc and under the handler.
    if args.handler != "runc":
        runc_cpu, runc_memory = spin_stats(cri, "runc", args.image, args.work, c, "stats-runc")
        cpu, memory = spin_stats(cri, args.handler, args.image, args.work, c, "stats-handler")
        c.true("ContainerStats of the same loop: CPU within 3x of runc's, both under 60 s of CPU (the container's, not the host's)",
               0 < cpu < 60e9 and 0 < runc_cpu < 60e9 and runc_cpu / 3 <= cpu <= runc_cpu * 3,
               "%s %.3f s, runc %.3f s" % (args.handler, cpu / 1e9, runc_cpu / 1e9))
        c.true("ContainerStats of the same loop: memory working set within 16 MiB of runc's",
               abs(memory - runc_memory) <= 16 << 20 and memory > 0,
               "%s %d bytes, runc %d bytes" % (args.handler, memory, runc_memory))

    # The second pod connects to the first across the bridge.
    client_pod, client_config = sandbox("client")
    client_ip = cri.PodSandboxStatus(pod_sandbox_id=client_pod).status.network.ip
    c.true("the two pods have their own addresses", client_ip != server_ip and client_ip.startswith("10.213."),
           "server %s, client %s" % (server_ip, client_ip))
    script = ("for i in $(seq 100); do r=$(nc -w 2 %s 8080 </dev/null) && [ -n \"$r\" ] && echo \"$r\" && exit 0;"
              " sleep 0.2; done; exit 1" % server_ip)
    client = container(client_pod, client_config, "client", ["sh", "-c", script])
    status = wait_exit(cri, client, 60)
    try:
        with open(status.log_path) as f:
            text = [line.rstrip("\n").split(" ", 3)[-1] for line in f]
    except OSError as error:
        text = [str(error)]
    c.check("pod 'client' reached pod 'server' over the bridge (exit code, what it read)",
            (0, ["pong-from-server"]), (status.exit_code, text))

    for pod in started:
        cri.StopPodSandbox(pod_sandbox_id=pod)
    stopped = [cri.PodSandboxStatus(pod_sandbox_id=pod).status.state for pod in started]
    c.check("StopPodSandbox: every pod not ready", [1] * len(started), stopped)
    for pod in started:
        cri.RemovePodSandbox(pod_sandbox_id=pod)
    left = [p.id for p in cri.ListPodSandbox().items]
    c.check("RemovePodSandbox: no pod left", [], left)
    return c.failed


def run_app(args):
    """Two pods of .app containers under the appd handler: exit code and log, ExecSync into a
    sandboxed app (and an attack through it), and one pod fetching from the other's server."""
    cri = CRI(args.containerd, args.socket)
    c = Checks()
    started = []
    probe = "/Probe.app/Probe"

    def sandbox(name, dns=None):
        config = pod_config(name, args.work, dns)
        pod = cri.RunPodSandbox(config=config, runtime_handler=args.handler).pod_sandbox_id
        started.append(pod)
        return pod, config

    def container(pod, config, name, command, memory=0):
        # The image's entrypoint is the app; `args` are its arguments.
        spec = {"metadata": {"name": name, "attempt": 0}, "image": {"image": args.app_image},
                "args": command, "log_path": name + ".log"}
        if memory:
            spec["linux"] = {"resources": {"memory_limit_in_bytes": memory}}
        created = cri.CreateContainer(pod_sandbox_id=pod, config=spec, sandbox_config=config).container_id
        cri.StartContainer(container_id=created)
        return created

    def log_lines(status):
        try:
            with open(status.log_path) as f:
                return [line.rstrip("\n").split(" ", 3)[-1] for line in f]
        except OSError as error:
            return [str(error)]

    server_pod, server_config = sandbox("app-server")
    status = cri.PodSandboxStatus(pod_sandbox_id=server_pod).status
    c.check("app: RunPodSandbox with handler %r (the pause container runs plain)" % args.handler, 0, status.state)
    server_ip = status.network.ip
    first = container(server_pod, server_config, "app-exits", ["exit", "5"])
    status = wait_exit(cri, first, 30)
    c.check("app: a signed .app container's exit code", 5, status.exit_code)
    server = container(server_pod, server_config, "app-server", ["serve-any", "8080"])
    reply = cri.ExecSync(container_id=server, cmd=[probe, "exit", "4"], timeout=20)
    c.check("app: ExecSync into the app's sandbox: exit code", 4, reply.exit_code)
    reply = cri.ExecSync(container_id=server, cmd=[probe, "read", "/etc/shadow"], timeout=20)
    c.check("app: attack through ExecSync: the host's /etc/shadow", b"read: refused ENOENT\n", reply.stdout)
    reply = cri.ExecSync(container_id=server, cmd=[probe, "ptrace"], timeout=20)
    c.true("app: attack through ExecSync: ptrace refused", reply.stdout.startswith(b"ptrace-attach: refused"),
           repr(reply.stdout))
    stats = cri.ContainerStats(container_id=server).stats
    c.true("app: ContainerStats reads the app's cgroup", stats.memory.working_set_bytes.value > 0,
           "working_set %d bytes" % stats.memory.working_set_bytes.value)

    # The pod's limits are the container's: 768 MiB, of which the app uses 600 (the sandbox's
    # default is 512 MiB), then resized up in place.
    big = container(server_pod, server_config, "app-768", ["alloc", "600"], memory=768 << 20)
    deadline = time.monotonic() + 30
    status = cri.ContainerStatus(container_id=big).status
    while time.monotonic() < deadline and "alloc: value 600 MiB touched" not in log_lines(status):
        time.sleep(0.3)
        status = cri.ContainerStatus(container_id=big).status
    c.check("app: a container limited to 768 MiB uses 600 MiB and runs (state, its last line)",
            (1, ["alloc: value 600 MiB touched"]), (status.state, log_lines(status)[-1:]))
    limit = cgroup_file(big, "memory.limit_in_bytes", "memory.max")
    c.check("app: its cgroup's memory limit is the pod's", str(768 << 20), read_file(limit))
    stats = cri.ContainerStats(container_id=big).stats
    c.true("app: ContainerStats: the working set holds the 600 MiB", stats.memory.working_set_bytes.value >= 600 << 20,
           "working_set %d bytes" % stats.memory.working_set_bytes.value)
    try:
        cri.UpdateContainerResources(container_id=big, linux={"memory_limit_in_bytes": 1 << 30})
        resized = read_file(limit)
    except grpc.RpcError as error:
        resized = error.details()
    c.check("app: UpdateContainerResources resizes the running container up to 1 GiB", str(1 << 30), resized)
    cri.StopContainer(container_id=big, timeout=0)

    # The pod's DNS and hostname: a pod whose dnsConfig names a DNS server in another pod.
    dns_pod, _ = sandbox("app-dns")
    dns = PodDNS(cri, dns_pod)
    try:
        named_pod, named_config = sandbox("app-named", dns=dns.address)
        resolver = container(named_pod, named_config, "app-resolve", ["resolve", DNS_NAME])
        status = wait_exit(cri, resolver, 30)
        c.check("app: resolves %s through the pod's dnsConfig (search %s, server %s)" % (DNS_NAME, DNS_SEARCH, dns.address),
                (0, ["resolve: value " + DNS_ADDRESS]), (status.exit_code, log_lines(status)))
        named = container(named_pod, named_config, "app-hostname", ["hostname"])
        status = wait_exit(cri, named, 30)
        c.check("app: gethostname() is the pod's", ["hostname: value app-named"], log_lines(status)[:1])
        # The pod's /etc/hosts as containerd wrote it for the pod (kubelet would add the pod's
        # address to it): the app reads that file, not one of its own.
        hosts = container(named_pod, named_config, "app-hosts", ["cat", "/etc/hosts"])
        status = wait_exit(cri, hosts, 30)
        sandboxes = os.path.join(os.path.dirname(os.path.abspath(args.work)), "containerd", "root",
                                 "io.containerd.grpc.v1.cri", "sandboxes")
        try:
            with open(os.path.join(sandboxes, named_pod, "hosts")) as f:
                pod_hosts = ["cat: value " + line.rstrip("\n") for line in f][:64] + ["cat: value end"]
        except OSError as error:
            pod_hosts = [str(error)]
        c.check("app: its /etc/hosts is the pod's (containerd's file for the pod)", pod_hosts, log_lines(status))
    finally:
        dns.stop()

    client_pod, client_config = sandbox("app-client")
    client = container(client_pod, client_config, "app-client",
                       ["fetch", server_ip, "8080"])
    status = wait_exit(cri, client, 30)
    attempts = 1
    while status.exit_code != 0 and attempts < 20:  # the server may not listen yet
        cri.RemoveContainer(container_id=client)
        time.sleep(0.3)
        client = container(client_pod, client_config, "app-client-%d" % attempts, ["fetch", server_ip, "8080"])
        status = wait_exit(cri, client, 30)
        attempts += 1
    c.check("app: pod 'app-client' fetched from pod 'app-server' over the bridge (exit code, output)",
            (0, ["fetch: pong 1"]), (status.exit_code, log_lines(status)[-1:]))

    for pod in started:
        cri.StopPodSandbox(pod_sandbox_id=pod)
    for pod in started:
        cri.RemovePodSandbox(pod_sandbox_id=pod)
    left = [p.id for p in cri.ListPodSandbox().items]
    c.check("app: no pod left", [], left)
    return c.failed


def cleanup(args):
    cri = CRI(args.containerd, args.socket)
    for pod in cri.ListPodSandbox(deadline=20).items:
        try:
            cri.StopPodSandbox(pod_sandbox_id=pod.id, deadline=30)
            cri.RemovePodSandbox(pod_sandbox_id=pod.id, deadline=30)
        except grpc.RpcError as error:
            print("cri.py cleanup: pod %s: %s" % (pod.id, error.details()), file=sys.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--containerd", default="/usr/bin/containerd")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--handler")
    parser.add_argument("--image")
    parser.add_argument("--app-image")
    parser.add_argument("--work")
    # A cgroupfs path, or a slice name when the runtime handler has SystemdCgroup = true.
    parser.add_argument("--cgroup-parent", default="/appd-oci-harness")
    parser.add_argument("--cleanup", action="store_true")
    args = parser.parse_args()
    global CGROUP_PARENT
    CGROUP_PARENT = args.cgroup_parent
    if args.cleanup:
        cleanup(args)
        return 0
    try:
        if args.app_image:
            return 1 if run_app(args) else 0
        return 1 if run(args) else 0
    except grpc.RpcError as error:
        print("FAIL cri: a call failed: %s: %s" % (error.code(), error.details()), flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
