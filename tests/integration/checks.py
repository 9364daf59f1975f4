#!/usr/bin/env python3
"""tests/integration/checks.py - the integration tests' Python parts, one function each, named after the test
that runs it: checks (an assertion or SystemExit when one fails) and the small programs a test starts (a
trainer on the Python package, a slow or flooding client). Run as checks.py NAME ARGS...; the function reads
ARGS as sys.argv[1:]."""
import sys


def addresses_1():
    """addresses.sh: both reachable workers produced elements, the lost one none"""
    import json, sys
    job, workers = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["workers"]
    ids = {w["address"]: w["worker_id"] for w in workers}
    made = {p["producer"]: p["elements"] for p in job["producers"]}
    lost = ids["127.0.0.1:9"]
    reach = [i for a, i in ids.items() if a != "127.0.0.1:9"]
    assert all(made.get("worker:%d" % i, 0) > 0 for i in reach), made
    assert made.get("worker:%d" % lost, 0) == 0, made
    assert [r["worker_id"] for r in job["cannot_serve"]] == [lost], job["cannot_serve"]
    assert "unreachable from client rank 0: UNAVAILABLE" in job["cannot_serve"][0]["reason"], job["cannot_serve"]


def big_elements_1():
    """big_elements.sh: part of tests/integration/big_elements.sh"""
    import sys
    import numpy as np
    from PIL import Image
    n = int(sys.argv[1])
    y, x = np.mgrid[0:n, 0:n]
    Image.fromarray(np.stack([x * 255 // n, y * 255 // n, (x + y) * 255 // (2 * n)], -1).astype("uint8")).save(
        sys.argv[2], quality=60)


def cannot_serve_1():
    """cannot_serve.sh: spillctl workers --json lists each refusal under its worker"""
    import json, sys
    ws = json.load(open(sys.argv[1]))["workers"]
    refused = sorted(len(w["cannot_serve"]) for w in ws)
    assert refused == [0, 0, 1, 1], refused
    assert all(r["job"] == 1 and r["reason"] for w in ws for r in w["cannot_serve"])


def compression_1():
    """compression.sh: the worker counts what it compressed, and that it shrank"""
    import sys
    v = {}
    for line in open(sys.argv[1]):
        for name in ("spillway_worker_compressed_input_bytes_total", "spillway_worker_compressed_output_bytes_total"):
            if line.startswith(name + " "):
                v[name] = v.get(name, 0) + float(line.split()[-1])
    i, o = v.get("spillway_worker_compressed_input_bytes_total", 0), v.get("spillway_worker_compressed_output_bytes_total", 0)
    print("     worker 1 compressed %d bytes into %d" % (i, o))
    assert i > 0 and 0 < o < i, v


def gpu_worker_1():
    """gpu_worker.sh: ... and the dispatcher's metrics count the death"""
    import sys
    m = dict(l.rsplit(" ", 1) for l in open(sys.argv[1]) if l.strip() and not l.startswith("#"))
    raise SystemExit(not (float(m["spillway_dispatcher_workers_declared_dead_total"]) >= 1
                          and "spillway_dispatcher_leases_expired_total" in m))


def job_life_1():
    """job_life.sh: part of tests/integration/job_life.sh"""
    import sys
    from spillway import Loader, Pipeline
    pipe = Pipeline.image_folder(sys.argv[2], shuffle=True, seed=1, epochs=50).decode_jpeg().center_crop(16).batch(8)
    for i in range(200):
        with Loader(pipe, dispatcher=sys.argv[1], local_cores=1, cut=0) as loader:
            next(iter(loader))
    print("ok 200")


def job_life_2():
    """job_life.sh: part of tests/integration/job_life.sh"""
    import sys
    from spillway import Loader, Pipeline
    pipe = Pipeline.image_folder(sys.argv[2], shuffle=True, seed=1, epochs=50).decode_jpeg().center_crop(16).batch(8)
    with Loader(pipe, dispatcher=sys.argv[1], local_cores=1, cut=0) as loader:
        it = iter(loader)
        next(it)
        loader.state_dict()
    with Loader(pipe, dispatcher=sys.argv[1], local_cores=1, cut=0, keep_job=True) as loader:
        next(iter(loader))
    print("ok")


def job_life_3():
    """job_life.sh: part of tests/integration/job_life.sh"""
    import sys, time
    from spillway import Loader, Pipeline
    pipe = Pipeline.image_folder(sys.argv[2], shuffle=True, seed=1, epochs=50).decode_jpeg().center_crop(16).batch(8)
    loaders = []
    for i in range(64):
        loaders.append(Loader(pipe, dispatcher=sys.argv[1], local_cores=1, cut=0))
        next(iter(loaders[-1]))
    print("created", flush=True)
    time.sleep(600)


def job_table_1():
    """job_table.sh: spillctl jobs lists the live table and a bounded history of ended jobs"""
    import json, sys
    jobs = json.load(open(sys.argv[1]))["jobs"]
    ids = [j["job"] for j in jobs]
    assert len(ids) == len(set(ids)), "a job listed twice"
    assert max(ids) == 1304, max(ids)
    ended = [j for j in jobs if j["ended"]]
    assert 0 < len(ended) <= 256 and len(jobs) <= 256 + 256, (len(ended), len(jobs))
    assert all(j["finished"] and not j["expired"] for j in jobs), "an unfinished job"


def job_table_2():
    """job_table.sh: spillctl jobs names each job's client host"""
    import json, sys
    hosts = sorted(j["client"] for j in json.load(open(sys.argv[1]))["jobs"])
    assert hosts == ["127.0.0.1"] * 3 + ["::1"], hosts


def logging_1():
    """logging.sh: part of tests/integration/logging.sh"""
    import json, sys
    lines = open(sys.argv[1]).read().splitlines()
    assert lines, "no lines"
    for l in lines:
        o = json.loads(l)
        assert set(o) == {"ts", "level", "component", "msg"}, o


def metrics_1():
    """metrics.sh: part of tests/integration/metrics.sh"""
    import socket, sys, time
    port, socks = int(sys.argv[1]), []
    for i in range(64):
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    cut = 0
    for t in range(12):
        time.sleep(1)
        for s in list(socks):
            try:
                s.sendall(b"X-Slow: %d\r\n" % t)
            except OSError:
                socks.remove(s)
                cut += 1
    print("cut", cut)


def metrics_2():
    """metrics.sh: part of tests/integration/metrics.sh"""
    import socket, sys, time
    port, socks = int(sys.argv[1]), []
    for i in range(1000):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall([b"\x00\xff garbage\r\n\r\n", b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 65536 + b"\r\n\r\n",
                       b"GET /metr"][i % 3])
            socks.append(s)
        except OSError:
            pass
    print("open", len(socks))
    time.sleep(3)


def remote_shards_1():
    """lib.sh (tar_shards, for remote_shards.sh and s3_shards.sh): the images of folder ARGV1 (one subfolder a
    class) dealt round-robin into ARGV2/shard-{0..3}.tar, keys sN/NAME, each a .jpg and a .cls member"""
    import io, os, sys, tarfile
    files = sorted((c, f) for c in os.listdir(sys.argv[1]) for f in os.listdir(os.path.join(sys.argv[1], c)))
    classes = sorted({c for c, _ in files})
    for s in range(4):
        with tarfile.open(os.path.join(sys.argv[2], "shard-%d.tar" % s), "w", format=tarfile.PAX_FORMAT) as t:
            for i, (c, f) in enumerate(files[s::4]):
                key = "s%d/%s" % (s, os.path.splitext(f)[0])
                t.add(os.path.join(sys.argv[1], c, f), key + ".jpg")
                label = str(classes.index(c)).encode()
                info = tarfile.TarInfo(key + ".cls")
                info.size = len(label)
                t.addfile(info, io.BytesIO(label))


def remote_shards_2():
    """remote_shards.sh: part of tests/integration/remote_shards.sh"""
    import json, sys
    d = json.load(open(sys.argv[1]))
    w = [p for p in d["producers"] if p["producer"].startswith("worker") and "source" in p]
    assert len(w) == 2 and all(p["source"]["bytes"] > 0 and p["source"]["requests"] > 0 for p in w), d["producers"]
    print("     " + "; ".join("%s: %d bytes, %d requests" % (p["producer"], p["source"]["bytes"], p["source"]["requests"])
                              for p in w))


def remote_shards_3():
    """remote_shards.sh: ... and read no tar header: 4 shard opens + one request per sample"""
    import json, sys
    w = [p for p in json.load(open(sys.argv[1]))["producers"] if p["producer"].startswith("worker")]
    assert all(p["source"]["requests"] == 4 + p["elements"] for p in w), w


def s3_shards_1():
    """s3_shards.sh: an S3 stand-in that checks SigV4 (s3rver does not): it serves the file FILE at any path in
    byte ranges, only to requests signed with SECRET for REGION and service s3 that carry and sign the session
    TOKEN; others get S3's 403 SignatureDoesNotMatch. Writes its port to PORTFILE; runs until killed."""
    import hashlib, hmac, http.server, re, sys
    path, secret, region, token, portfile = sys.argv[1:6]
    data = open(path, "rb").read()

    def key(date):
        k = ("AWS4" + secret).encode()
        for part in (date, region, "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        return k

    def signed(h, method, target):
        m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, "
                         r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", h.get("Authorization", ""))
        if not m or m.group(3) != region:
            return False
        names = m.group(4).split(";")
        if not {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"} <= set(names) \
                or h.get("x-amz-security-token") != token or not h.get("x-amz-date", "").startswith(m.group(2)):
            return False
        canon = "\n".join([method, target, ""] + ["%s:%s" % (n, " ".join(h.get(n, "").split())) for n in names] +
                          ["", m.group(4), h["x-amz-content-sha256"]])
        sts = "\n".join(["AWS4-HMAC-SHA256", h["x-amz-date"], "%s/%s/s3/aws4_request" % (m.group(2), region),
                         hashlib.sha256(canon.encode()).hexdigest()])
        return hmac.compare_digest(hmac.new(key(m.group(2)), sts.encode(), hashlib.sha256).hexdigest(), m.group(5))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            if not signed(self.headers, "GET", self.path):
                body = b"<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request " \
                       b"signature we calculated does not match the signature you provided.</Message></Error>"
                self.send_response(403)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            a, b = (int(x) for x in re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers["Range"]).groups())
            b = min(b, len(data) - 1)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))
            self.send_header("Content-Length", str(b - a + 1))
            self.end_headers()
            self.wfile.write(data[a:b + 1])

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    import os
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()


def restart_1():
    """restart.sh: part of tests/integration/restart.sh"""
    import json, sys
    d = json.load(open(sys.argv[1]))
    d["ops"].append({"op": "python", "function": "pyops_fixture:stamp_rng"})
    json.dump(d, open(sys.argv[2], "w"))


def tls_1():
    """tls.sh: part of tests/integration/tls.sh"""
    import sys
    from spillway import Loader, Pipeline
    data, disp, c = sys.argv[1:]
    p = Pipeline.image_folder(data, shuffle=True, seed=8, epochs=1).decode_jpeg().center_crop(32).batch(16)
    with Loader(p, dispatcher=disp, local_cores=0, tls_ca=c + "/ca.pem", tls_cert=c + "/client.pem",
                tls_key=c + "/client.key") as loader:
        print(sum(b.n for b in loader))


def tls_2():
    """tls.sh: part of tests/integration/tls.sh"""
    import sys
    from spillway import Loader, Pipeline
    p = Pipeline.image_folder(sys.argv[1], epochs=1).decode_jpeg().center_crop(32).batch(16)
    try:
        Loader(p, dispatcher=sys.argv[2], local_cores=0)
    except Exception as e:
        print(e)


def plugin_1():
    """plugin.sh: part of tests/integration/plugin.sh"""
    import glob, os, sys
    import numpy as np
    def box(img, r):    # the plugin's rule: the mean of the (2r+1)^2 window, edges repeated, rounded half up
        h, w, _ = img.shape
        p = np.pad(img.astype(np.uint32), ((r, r), (r, r), (0, 0)), mode="edge")
        s = sum(p[dy:dy + h, dx:dx + w] for dy in range(2 * r + 1) for dx in range(2 * r + 1))
        n = (2 * r + 1) ** 2
        return ((s + n // 2) // n).astype(np.uint8)
    files = sorted(glob.glob(os.path.join(sys.argv[1], "b*_t0.npy")))
    same = all((np.stack([box(x, 2) for x in np.load(f)]) == np.load(f.replace(sys.argv[1], sys.argv[2]))).all()
               for f in files)
    print("batches", len(files), "same", same)


def python_op_1():
    """python_op.sh: part of tests/integration/python_op.sh"""
    import os, sys
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(11)
    for i in range(40):
        d = os.path.join(sys.argv[1], "ab"[i % 2])
        os.makedirs(d, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, size=(24 + i % 5, 28, 3), dtype=np.uint8)).save("%s/img%02d.png" % (d, i))
    Image.fromarray(np.zeros((24, 24, 3), np.uint8)).save(os.path.join(sys.argv[1], "b", "black.png"))


def readme_1():
    """readme.sh: part of tests/integration/readme.sh"""
    import re, sys
    text = open(sys.argv[1]).read()
    part = text.split("\n## " + sys.argv[2] + "\n", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"^```" + re.escape(sys.argv[3]) + r"\n(.*?)^```$", part, re.M | re.S)
    sys.stdout.write(m.group(1))


def replan_bandwidth_1():
    """replan_bandwidth.sh: spillctl job shows CPU per element measured on both workers and the client"""
    import json, sys
    d = json.load(open(sys.argv[1]))
    workers = [p for p in d["producers"] if p["producer"].startswith("worker")]
    assert len(workers) == 2 and all(p["cpu_ns_per_element"] > 0 for p in workers), d["producers"]
    assert d["client_remote_ns"] > 0, d


def replan_bandwidth_2():
    """replan_bandwidth.sh: a re-plan on the measured rate moved the cut to smaller elements"""
    import json, re, sys
    plan = json.loads(open(sys.argv[2]).read())
    size = {c["cut"]: c["bytes"] for c in plan["candidates"]}
    moves = [(int(a), int(b)) for a, b in re.findall(r'why="measured rate off the prediction".* cut=(\d+)->(\d+)',
                                                       open(sys.argv[1]).read())]
    assert any(b != a and size[b] < size[a] for a, b in moves), (moves, size)


def replan_handback_1():
    """replan_handback.sh: most elements came from the client's own threads"""
    import json, sys
    d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    p = d["producers"]
    assert p["local"] + p["rescue"] > p["remote"], p


def logging_skipped_warning():
    """logging.sh: the skipped sample's warning is one of the JSON lines, its quotes intact"""
    import json
    ws = [json.loads(line) for line in open(sys.argv[1])]
    raise SystemExit(not any(w["level"] == "warn" and "bad.JPEG" in w["msg"] and "skipped" in w["msg"] for w in ws))


def metrics_promql_value():
    """metrics.sh: the first sample's value of a Prometheus query answer on stdin, or nothing"""
    import json
    r = json.load(sys.stdin).get("data", {}).get("result", [])
    print(r[0]["value"][1] if r else "")


def metrics_delivered():
    """metrics.sh: the elements spillctl job --json (stdin) counts over its producers (a client's GPU row is a
    part of its client's)"""
    import json
    print(sum(p["elements"] for p in json.load(sys.stdin)["producers"]
              if not (p["producer"].startswith("client:") and p["producer"].endswith(":gpu"))))


def metrics_rates_agree():
    """metrics.sh: Prometheus's rate (argv 1) within 20% of spillctl job's (argv 2), which is above 0"""
    q, s = float(sys.argv[1]), float(sys.argv[2])
    raise SystemExit(not (s > 0 and abs(q - s) <= 0.2 * s))


def profile_parallel_measured_ms():
    """profile_parallel.sh: when the client logged (JSON lines in argv 1) that it had measured itself, in ms"""
    import datetime
    import json
    for line in open(sys.argv[1]):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "measured for the planner" in d.get("msg", ""):
            t = datetime.datetime.strptime(d["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
            print(int(t.timestamp() * 1000))


def journal_compat_later_kind():
    """journal_compat.sh: append to the journal at argv 1 a well-framed record (length, CRC32C) of a kind a
    later release might add: JournalUpdate field 47, which this release does not know"""
    import struct

    def crc32c(data):
        c = 0xFFFFFFFF
        for b in data:
            c ^= b
            for _ in range(8):
                c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        return c ^ 0xFFFFFFFF
    rec = bytes([0xFA, 0x02, 0x02, 0x08, 0x01])     # field 47, length 2: a message with field 1 = 1
    with open(sys.argv[1], "ab") as f:
        f.write(struct.pack("<II", len(rec), crc32c(rec)) + rec)

def recipes_on_test_data():
    """recipes.sh: the recipe at argv 1 with its source moved to the test photos at argv 2 (an image folder's
    train/, or its shards/*.tar; masks and COCO annotations from scripts/data/make_targets.py in targets/
    beside argv 3) or, for audio, the test speech at argv 4 (its train/), one epoch, batches of 8: written to
    argv 3"""
    import json
    import os
    spec = json.load(open(sys.argv[1]))
    src = spec["source"]
    audio = src["format"] in ("audio_folder", "wav_folder")
    src["path"] = sys.argv[4] + "/train" if audio else \
        sys.argv[2] + ("/shards/shard-*.tar" if src["format"] == "tar_shards" else "/train")
    src["epochs"] = 1
    spec["batch"]["size"] = 8
    targets = os.path.join(os.path.dirname(sys.argv[3]), "targets")     # scripts/data/make_targets.py's
    if src["format"] == "coco":
        src["annotations"] = os.path.join(targets, "instances.json")
    for f in src.get("fields", {}).values():
        if f.get("path"):                       # a parallel folder: the masks
            f["path"] = os.path.join(targets, "masks")
    json.dump(spec, open(sys.argv[3], "w"))


if __name__ == "__main__":
    check = globals()[sys.argv[1]]
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    check()
