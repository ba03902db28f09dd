#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/<target>/ from the repository's tests
and examples (string literals that look like the target's input) plus a few
hand-made inputs.  Run from anywhere: python3 fuzz/make_seeds.py [target...]
(no target: all of them).
Seeds are small (< 4 KiB each) and named by content hash, so re-running only
adds files."""
import hashlib
import os
import re
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
SLURM_TEST = "/work/slurm-src/slurm-wlm-22.05.8/testsuite/expect/test39.18"
ONLY = set(sys.argv[1:])


def put(target, data):
    if ONLY and target not in ONLY:
        return
    if isinstance(data, str):
        data = data.encode()
    if not data or len(data) > 4096:
        return
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


STR_RE = re.compile(r'r#"(.*?)"#|"((?:[^"\\]|\\.)*)"', re.S)


def rust_strings(path):
    try:
        text = open(path, encoding="utf-8").read()
    except OSError:
        return []
    out = []
    for m in STR_RE.finditer(text):
        if m.group(1) is not None:
            out.append(m.group(1))
        else:
            s = m.group(2)
            # Rust string continuation: backslash-newline plus indentation
            s = re.sub(r"\\\n\s*", "", s)
            s = s.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').replace("\\\\", "\\")
            out.append(s)
    return out


def rust_files(*dirs):
    for d in dirs:
        for base, _, files in os.walk(os.path.join(ROOT, d)):
            for f in files:
                if f.endswith(".rs"):
                    yield os.path.join(base, f)


def main():
    files = list(rust_files("src/core", "tests"))
    # gres.conf
    for f in files:
        for s in rust_strings(f):
            if re.search(r"(?i)^\s*(name|nodename|autodetect)=", s, re.M) and "|" not in s:
                put("gres_conf", s.replace("{DEV}", "/dev"))
    put("gres_conf", "AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia[0-3] Cores=0-7\nName=mps Count=400\n")
    put("gres_conf", "NodeName=tux[0-3] Name=gpu File=/dev/nvidia[0-1] Links=-1,2 Flags=nvidia_gpu_env\nInclude inc.conf\n\0NodeName=node0 Name=shard Count=8\n")
    put("gres_conf", "Name=gpu Type=h100 File=/dev/nvidia0 COREs=0-1 \\\n  Flags=CountOnly # comment\nName=nic Count=2K\n")
    # fake_gpus.conf
    for f in files:
        for s in rust_strings(f):
            if re.search(r"^[^|\n]*\|[^|\n]*\|[^|\n]*\|", s, re.M) and "Name=" not in s:
                put("fake_gpus", s)
    try:
        t = open(SLURM_TEST).read()
        for m in re.finditer(r'set fake_gpus_conf "(.*?)"', t, re.S):
            put("fake_gpus", m.group(1).replace("${dev}", "/dev/nvidia").replace("$test_name", "t").replace("$cpus_count", "4").replace("$cpu_array", "X"))
    except OSError:
        pass
    put("fake_gpus", "tesla|4|~one|(null)|/dev/nvidia0\ntesla|8|0-7|-1,2|/dev/nvidia1|GPU-1|nvidia_gpu_env,amd_gpu_env\n")
    # slurmd -> slurmstepd messages
    def pstr(s):
        if s is None:
            return struct.pack(">I", 0)
        b = s.encode() + b"\0"
        return struct.pack(">I", len(b)) + b

    def devs(n, uid=False):
        out = struct.pack(">I", n)
        for i in range(n):
            out += struct.pack(">IIIII", i, i, 1, 195, i) + pstr(f"/dev/nvidia{i}") + pstr(f"MIG-{i}" if uid else None)
        return out

    for n in (0, 1, 2, 8):
        put("stepd_wire", devs(n) + struct.pack(">I", 0x1f))
        put("stepd_wire", devs(n, True) + struct.pack(">I", 0x4))
        counts = struct.pack(">I", n) + b"".join(struct.pack(">QQ", 100, i) for i in range(n))
        put("stepd_wire", devs(n) + counts)  # mps
        put("stepd_wire", devs(n) + struct.pack(">I", 0x1f) + counts)  # shard
    # --gpu-freq: job value, GpuFreqDef, clocks
    clocks = struct.pack("<" + "I" * 6, 1980, 1755, 1500, 1005, 510, 345)
    for job, d in [("low,memory=high,verbose", "high,memory=high"), ("gpu:medium;cpu:high", ""), ("1500", "memory=highm1"),
                   ("memory=-1,verbose", "low"), ("gpu:2000,memory=9999999999999", "medium,memory=medium"), ("", "")]:
        put("gpu_freq", f"{job}\n{d}\n".encode() + clocks)
    # hostlists
    for h in ["tux[0-7,10]", "/dev/nvidia[0-3]", "/dev/nvidia0,/dev/nvidia2", "gpu[00-02]", "r[1-2]n[0-1]", "a[0-3", "a[3-1]", "n[001-100],m"]:
        put("hostlist", h)
    # kernel log lines and state files (gres-rs health)
    for f in rust_files("crates/gres-health/src", "tests/cli"):
        for s in rust_strings(f):
            if "NVRM" in s or "gres-rs-health-state" in s:
                put("health_log", s)
    # <selector><comm, NUL><rest>: the fuzz target puts comm and rest where a user controls a kernel message
    put("health_log", b"\x00NVRM: Xid (0:0)\x00NVRM: Xid (PCI:0000:18:00): 48, pid=1, name=x, DBE")
    put("health_log", b"\x0cjob\x00/tmp/NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, GPU has fallen off the bus.")
    put("health_log", b"\x04a, pid=2, name\x00=y, Graphics Exception\nMay 18 19:02:39 node17 kernel: NVRM: Xid (PCI:0000:41:00): 13")
    put("health_log", "6,5,100,-;job[30268]: segfault at 0 ip 00007f0000001000 sp 00007ffd00000000 error 6 in "
        "NVRM: Xid (PCI:0000:18:00): 48, pid=1, name=x, DBE[400000+1000]\n"
        "12,6,101,-;NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
        "4,7,102,-,caller=T12;NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        " SUBSYSTEM=pci\n")
    put("health_log", "[Mon May 18 19:02:39 2024] NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, y\n"
        "<4>[  12.345678] NVRM: Xid (0000:03:00): 3, C 00000005\n"
        "2024-05-18T19:02:39.123456+02:00 node17 kernel: [   12.345678] NVRM: Xid (PCI:10000:01:00.1): 31, y\n"
        "May 18 19:02:39 node17 kernel: audit: NVRM: Xid (PCI:0000:41:00): 79, y\n")
    put("health_log", "gres-rs-health-state 2\nboot_id=0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d\nkmsg_seq=100\n"
        "step_records=512\nline=00000000deadbeef\nend\n")


if __name__ == "__main__":
    main()
