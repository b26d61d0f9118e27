#!/usr/bin/python3
"""Writes a one-layer docker-archive (the `docker save` layout) from files on the host.

The one format Docker 20.10's `docker load`, `podman load` and `ctr images import` all take;
docs/oci-image.md gives the exact layout, which `appd image` is to write the same way:

    manifest.json            [{"Config": "<c>.json", "RepoTags": [TAG], "Layers": ["<l>/layer.tar"]}]
    repositories             {"<name>": {"<tag>": "<l>"}}  (for docker's older loader)
    <c>.json                 the image config; <c> = sha256 of these bytes
    <l>/layer.tar            the root filesystem, an uncompressed ustar; <l> = its sha256
    <l>/VERSION, <l>/json    the legacy layer files docker save writes

The archive and its layer are reproducible: entries sorted, mtime 0, owner 0:0.

    image.py OUT --tag NAME:TAG [--file SRC:DEST[:MODE]]... [--link DEST:TARGET]...
             [--dir DEST[:MODE]]... [--entrypoint JSON] [--cmd JSON] [--env K=V]...
"""
import argparse
import hashlib
import io
import json
import os
import sys
import tarfile


def entry(name, kind, mode, size=0, target=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.linkname = target
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def layer_bytes(files, links, dirs):
    """files: {dest: (src, mode)}; links: {dest: target}; dirs: {dest: mode}. Parents are added."""
    wanted = {}
    def parents(path):
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            wanted.setdefault("/".join(parts[:i]), ("dir", 0o755, None))
    for dest, mode in dirs.items():
        parents(dest)
        wanted[dest.strip("/")] = ("dir", mode, None)
    for dest, (src, mode) in files.items():
        parents(dest)
        wanted[dest.strip("/")] = ("file", mode, src)
    for dest, target in links.items():
        parents(dest)
        wanted[dest.strip("/")] = ("link", 0o777, target)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(wanted):
            kind, mode, extra = wanted[name]
            if kind == "dir":
                tar.addfile(entry(name, tarfile.DIRTYPE, mode))
            elif kind == "link":
                tar.addfile(entry(name, tarfile.SYMTYPE, mode, target=extra))
            else:
                with open(extra, "rb") as f:
                    data = f.read()
                tar.addfile(entry(name, tarfile.REGTYPE, mode, size=len(data)), io.BytesIO(data))
    return out.getvalue()


def add(tar, name, data):
    tar.addfile(entry(name, tarfile.REGTYPE, 0o644, size=len(data)), io.BytesIO(data))


def write_archive(out_path, tag, layer, entrypoint, cmd, env):
    layer_id = hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {"Env": env, "Entrypoint": entrypoint, "Cmd": cmd, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "scripts/oci/image.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_id = hashlib.sha256(config_bytes).hexdigest()
    name, _, version = tag.rpartition(":")
    manifest = [{"Config": config_id + ".json", "RepoTags": [tag], "Layers": [layer_id + "/layer.tar"]}]
    legacy = {"id": layer_id, "created": "1970-01-01T00:00:00Z", "os": "linux",
              "architecture": "amd64", "config": config["config"]}
    tmp = out_path + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        add(tar, config_id + ".json", config_bytes)
        tar.addfile(entry(layer_id, tarfile.DIRTYPE, 0o755))
        add(tar, layer_id + "/VERSION", b"1.0")
        add(tar, layer_id + "/json", json.dumps(legacy, sort_keys=True).encode())
        add(tar, layer_id + "/layer.tar", layer)
        add(tar, "manifest.json", json.dumps(manifest, separators=(",", ":")).encode())
        add(tar, "repositories", json.dumps({name: {version: layer_id}}).encode())
    os.replace(tmp, out_path)
    return config_id


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--link", action="append", default=[])
    parser.add_argument("--dir", action="append", default=[])
    parser.add_argument("--entrypoint", default="null")
    parser.add_argument("--cmd", default="null")
    parser.add_argument("--env", action="append", default=[])
    args = parser.parse_args()
    if ":" not in args.tag:
        sys.exit("image.py: --tag needs NAME:TAG, got %r" % args.tag)
    files, links, dirs = {}, {}, {}
    for spec in args.file:
        parts = spec.split(":")
        if len(parts) not in (2, 3):
            sys.exit("image.py: --file needs SRC:DEST[:MODE], got %r" % spec)
        files[parts[1]] = (parts[0], int(parts[2], 8) if len(parts) == 3 else 0o755)
    for spec in args.link:
        dest, _, target = spec.partition(":")
        links[dest] = target
    for spec in args.dir:
        dest, _, mode = spec.partition(":")
        dirs[dest] = int(mode, 8) if mode else 0o755
    env = args.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    config_id = write_archive(args.out, args.tag, layer_bytes(files, links, dirs),
                              json.loads(args.entrypoint), json.loads(args.cmd), env)
    print(config_id)


if __name__ == "__main__":
    main()
