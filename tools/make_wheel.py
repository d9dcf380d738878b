#!/usr/bin/env python3
"""Packs the built Python binding into a wheel: llm42.py, llm42.pyi, the _llm42 extension and
libllm42 (under llm42.libs/, preloaded by llm42.py), tagged for the interpreter running this
script, for this machine's platform or the one named by --platform (tools/package.sh:
manylinux_2_36_x86_64, for a build whose libllm42 carries its dependencies). Standard library only.

    make_wheel.py --module-dir BUILD/bindings/python --lib BUILD/lib/libllm42.so.0 \
                  --version 0.2.0 [--platform TAG] --out DIR
"""
import argparse
import base64
import hashlib
import os
import sys
import sysconfig
import zipfile


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--module-dir", required=True)
    p.add_argument("--lib", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--platform", default=sysconfig.get_platform().replace("-", "_").replace(".", "_"))
    p.add_argument("--out", required=True)
    a = p.parse_args()

    py = "cp%d%d" % sys.version_info[:2]
    tag = "%s-%s-%s" % (py, py, a.platform)
    dist = "llm42-%s.dist-info" % a.version
    files = []
    for name in ("llm42.py", "llm42.pyi", "_llm42.so"):
        with open(os.path.join(a.module_dir, name), "rb") as f:
            files.append((name, f.read()))
    with open(a.lib, "rb") as f:
        files.append(("llm42.libs/" + os.path.basename(a.lib), f.read()))
    files.append((dist + "/METADATA", (
        "Metadata-Version: 2.1\nName: llm42\nVersion: %s\n"
        "Summary: Selective-determinism LLM inference (Python binding of libllm42)\n"
        "License: Apache-2.0\nRequires-Python: ==%d.%d.*\n" % ((a.version,) + sys.version_info[:2])).encode()))
    files.append((dist + "/WHEEL", (
        "Wheel-Version: 1.0\nGenerator: llm42 make_wheel.py\nRoot-Is-Purelib: false\nTag: %s\n" % tag).encode()))
    record = [record_line(n, d) for n, d in files] + [dist + "/RECORD,,"]
    files.append((dist + "/RECORD", ("\n".join(record) + "\n").encode()))

    os.makedirs(a.out, exist_ok=True)
    wheel = os.path.join(a.out, "llm42-%s-%s.whl" % (a.version, tag))
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") or ".so." in name else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    print(wheel)


if __name__ == "__main__":
    main()
