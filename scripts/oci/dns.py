#!/usr/bin/python3
"""A pod's DNS server for scripts/oci/cri.py: answers A queries for the names it is given
(NAME=ADDRESS ...) on UDP port 53 of the network namespace it runs in (nsenter --net=POD's),
NXDOMAIN for any other, until it is killed. What a cluster's DNS service is to a pod whose
dnsConfig names it; written here because the harness's bridge has no host address and busybox
has no DNS server applet.

    dns.py NAME=ADDRESS...
"""
import socket
import sys


def answer(query, names):
    if len(query) < 12:
        return None
    ident, flags, count = query[0:2], query[2:4], int.from_bytes(query[4:6], "big")
    if count != 1:
        return None
    at, labels = 12, []
    while at < len(query) and query[at] != 0:
        size = query[at]
        labels.append(query[at + 1:at + 1 + size].decode("ascii", "replace").lower())
        at += 1 + size
    question = query[12:at + 5]
    qtype = int.from_bytes(query[at + 1:at + 3], "big")
    name = ".".join(labels)
    address = names.get(name)
    rd = flags[0] & 0x01
    if address is None or qtype != 1:
        rcode = 3 if address is None else 0
        header = ident + bytes([0x80 | rd, 0x80 | rcode]) + b"\x00\x01\x00\x00\x00\x00\x00\x00"
        return header + question
    header = ident + bytes([0x80 | rd, 0x80]) + b"\x00\x01\x00\x01\x00\x00\x00\x00"
    record = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + socket.inet_aton(address)
    return header + question + record


def main():
    names = dict(arg.lower().split("=", 1) for arg in sys.argv[1:])
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("0.0.0.0", 53))
    print("dns.py: serving %s" % ", ".join(sorted(names)), flush=True)
    while True:
        query, peer = server.recvfrom(512)
        reply = answer(query, names)
        if reply:
            server.sendto(reply, peer)


if __name__ == "__main__":
    main()
