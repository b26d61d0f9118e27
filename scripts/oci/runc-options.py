#!/usr/bin/python3
"""Prints one string field of the runc.v1 Options in `ctr containers info` JSON read on stdin.

    ctr containers info ID | runc-options.py FIELD_NUMBER     (6: BinaryName, 7: Root)

The options are a protobuf Any; its value is decoded by hand (varint keys, length-delimited
strings) since only the wire format is needed, not containerd's .proto.
"""
import base64
import json
import sys


def varint(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def fields(data):
    at = 0
    while at < len(data):
        key, at = varint(data, at)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, at = varint(data, at)
        elif kind == 2:
            length, at = varint(data, at)
            value, at = data[at:at + length], at + length
        else:
            raise SystemExit("runc-options.py: wire type %d not expected" % kind)
        yield number, value


wanted = int(sys.argv[1])
value = base64.b64decode(json.load(sys.stdin)["Runtime"]["Options"]["value"])
print(next((v.decode() for n, v in fields(value) if n == wanted and isinstance(v, bytes)), ""))
