#!/usr/bin/env python3
# scripts/dev/bundle_wheel.py - turns the wheel `pip wheel` made (py3-none-linux_x86_64, whose
# libspillway.so needs ~100 Debian 12 libraries) into one that imports on any glibc host: every library its
# ELF files need, transitively, except those a manylinux policy lets the host provide, is copied into
# spillway/_libs/ under a hashed name, and NEEDED, SONAME and RUNPATH are rewritten with patchelf; then checked.
# Not auditwheel (no policy files, one platform); a one-shot build tool, single-threaded. `make wheel` runs it.
import argparse
import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

# What a manylinux policy lets the host provide: glibc's libraries and the GCC runtime. libresolv is glibc's
# too (the policies list it): a copy of it would need the GLIBC_PRIVATE symbols of the libc it was built with.
ALLOWED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2",
           "ld-linux-x86-64.so.2", "libstdc++.so.6", "libgcc_s.so.1"}
LIBS_DIR = "spillway/_libs"
SONAME_RE = re.compile(r"^(.*?)(\.so(?:\..*)?)$")


def die(msg):
    sys.exit("bundle_wheel: " + msg)


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        die("%s failed (exit %d): %s" % (" ".join(argv), p.returncode, p.stderr.strip()))
    return p.stdout


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def dynamic(path):
    """(NEEDED list, SONAME or None, RUNPATH/RPATH or None) from `readelf -d`."""
    needed, soname, runpath = [], None, None
    for line in run(["readelf", "-d", "-W", path]).splitlines():
        m = re.search(r"\((NEEDED|SONAME|RUNPATH|RPATH)\)\s+\S.*?\[(.*)\]", line)
        if not m:
            continue
        if m.group(1) == "NEEDED":
            needed.append(m.group(2))
        elif m.group(1) == "SONAME":
            soname = m.group(2)
        else:
            runpath = m.group(2)
    return needed, soname, runpath


def version_needs(path):
    """{library: set of symbol version names} this file needs (`readelf -V`, .gnu.version_r)."""
    needs, cur = {}, None
    for line in run(["readelf", "-V", "-W", path]).splitlines():
        m = re.search(r"File: (\S+)\s+Cnt:", line)
        if m:
            cur = m.group(1)
            needs.setdefault(cur, set())
            continue
        m = re.search(r"Name: (\S+)\s+Flags:", line)
        if m and cur is not None:
            needs[cur].add(m.group(1))
    return needs


def resolve(path):
    """{NEEDED name: file} for the whole closure of path, as this host's loader resolves it (ldd)."""
    found = {}
    for line in run(["ldd", path]).splitlines():
        m = re.match(r"\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        if not m:
            continue
        if m.group(2) == "not found":
            die("%s needs %s, which this host does not have: install it (scripts/install-deps.sh)"
                % (os.path.basename(path), m.group(1)))
        found[m.group(1)] = m.group(2)
    return found


def private_name(soname, src):
    """libfoo.so.N -> libfoo-<8 hex of the file's sha256>.so.N: a name no host library has."""
    with open(src, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:8]
    m = SONAME_RE.match(soname)
    if not m:
        die("%s: not a shared library name (lib*.so[.N])" % soname)
    return "%s-%s%s" % (m.group(1), digest, m.group(2))


def version_key(v):
    return tuple(int(x) for x in v.split("."))


def flatten(root, name, version):
    """Move NAME-VERSION.data/{purelib,platlib}/ (where setuptools puts a non-pure package) to the wheel's
    root, which installs to platlib: the package and its _libs/ then sit in one folder, as RUNPATH assumes."""
    data = os.path.join(root, "%s-%s.data" % (name, version))
    for scheme in ("purelib", "platlib"):
        src = os.path.join(data, scheme)
        if not os.path.isdir(src):
            continue
        for d, _, fs in os.walk(src):
            for f in fs:
                dst = os.path.join(root, os.path.relpath(os.path.join(d, f), src))
                if os.path.exists(dst):
                    die("%s is in the wheel twice (%s and the root)" % (os.path.relpath(dst, root), scheme))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.replace(os.path.join(d, f), dst)
        shutil.rmtree(src)
    if os.path.isdir(data) and not os.listdir(data):
        os.rmdir(data)


def bundle(root):
    """Copy and patch what the ELF files under root need; returns {NEEDED name: private file name}."""
    top = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if is_elf(os.path.join(d, f)))
    if not any(os.path.basename(p) == "libspillway.so" for p in top):
        die("the wheel carries no spillway/libspillway.so")
    libs = os.path.join(root, LIBS_DIR)
    os.makedirs(libs, exist_ok=True)
    closure = {}
    for p in top:
        closure.update(resolve(p))
    # One copy per file: two names of one library (libfoo.so and libfoo.so.1) would else load it twice.
    renamed, by_file = {}, {}
    for name, src in sorted(closure.items()):
        if name in ALLOWED:
            continue
        real = os.path.realpath(src)
        if real not in by_file:
            by_file[real] = private_name(name, real)
            dst = os.path.join(libs, by_file[real])
            shutil.copyfile(real, dst)
            os.chmod(dst, 0o755)
        renamed[name] = by_file[real]
    for p in top + [os.path.join(libs, n) for n in sorted(by_file.values())]:
        needed, _, _ = dynamic(p)
        rel = os.path.relpath(libs, os.path.dirname(p))
        # One operation per patchelf call: 0.14 (Debian 12) combining --replace-needed with --set-rpath
        # writes a NEEDED string as the RUNPATH.
        ops = []
        if os.path.dirname(p) == libs:
            ops.append(["--set-soname", os.path.basename(p)])
        ops += [["--replace-needed", n, renamed[n]] for n in needed if n in renamed]
        if any(n in renamed for n in needed):
            ops.append(["--set-rpath", "$ORIGIN" if rel == "." else "$ORIGIN/" + rel])
        for op in ops:
            run(["patchelf"] + op + [p])
    return renamed


def check(root, glibc_max):
    """Every ELF file needs only the allowed set and files RUNPATH finds in the bundle, and no symbol version
    of glibc newer than glibc_max. Returns (max GLIBC needed, report lines); exits naming any violation."""
    problems, most, others = [], "0.0", {}
    for d, _, fs in os.walk(root):
        for f in sorted(fs):
            p = os.path.join(d, f)
            if not is_elf(p):
                continue
            rel = os.path.relpath(p, root)
            needed, _, runpath = dynamic(p)
            dirs = [r.replace("$ORIGIN", d) for r in (runpath or "").split(":") if r]
            for n in needed:
                if n in ALLOWED:
                    continue
                if not any(os.path.isfile(os.path.join(x, n)) and os.path.realpath(x).startswith(
                        os.path.realpath(root) + os.sep) for x in dirs):
                    problems.append("%s needs %s: not one the host may provide, nor found by its RUNPATH (%s) "
                                    "in the wheel" % (rel, n, runpath or "none"))
            for lib, versions in version_needs(p).items():
                for v in versions:
                    m = re.match(r"^(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)$", v)
                    if v == "GLIBC_PRIVATE":
                        problems.append("%s needs GLIBC_PRIVATE symbols of %s: only that glibc build has them"
                                        % (rel, lib))
                    elif m and m.group(1) == "GLIBC":
                        if version_key(m.group(2)) > version_key(most):
                            most = m.group(2)
                        if version_key(m.group(2)) > version_key(glibc_max):
                            problems.append("%s needs %s (from %s): newer than the tag's glibc %s"
                                            % (rel, v, lib, glibc_max))
                    elif m and version_key(m.group(2)) > version_key(others.get(m.group(1), "0")):
                        others[m.group(1)] = m.group(2)
    if problems:
        die("the bundled wheel would not load on every manylinux_%s host:\n  " % glibc_max.replace(".", "_")
            + "\n  ".join(problems))
    return most, ", ".join("%s_%s" % kv for kv in sorted(others.items()))


def record_line(root, rel):
    with open(os.path.join(root, rel), "rb") as f:
        data = f.read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [rel, "sha256=" + digest, str(len(data))]


def repack(root, out_dir, name, version, tag):
    """Rewrite WHEEL (tag), RECORD (every file's hash) and zip root as OUT_DIR/name-version-tag.whl."""
    info = "%s-%s.dist-info" % (name, version)
    wheel_file = os.path.join(root, info, "WHEEL")
    with open(wheel_file) as f:
        lines = [ln for ln in f.read().splitlines() if ln and not ln.startswith(("Tag:", "Root-Is-Purelib:"))]
    lines += ["Root-Is-Purelib: false", "Tag: " + tag]
    with open(wheel_file, "w") as f:
        f.write("\n".join(lines) + "\n")
    files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    record = info + "/RECORD"
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for rel in files:
        if rel != record:
            w.writerow(record_line(root, rel))
    w.writerow([record, "", ""])
    with open(os.path.join(root, record), "w") as f:
        f.write(buf.getvalue())
    out = os.path.join(out_dir, "%s-%s-%s.whl" % (name, version, tag))
    tmp = out + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in [f for f in files if not f.startswith(info + "/")] + \
                   [f for f in files if f.startswith(info + "/") and f != record] + [record]:
            z.write(os.path.join(root, rel), rel)
    os.replace(tmp, out)
    return out


def main():
    ap = argparse.ArgumentParser(description="Bundle the libraries a Spillway wheel needs into it (manylinux).")
    ap.add_argument("wheel", help="the wheel pip made (spillway-V-py3-none-linux_x86_64.whl)")
    ap.add_argument("out_dir", help="where the bundled wheel goes")
    ap.add_argument("--glibc", default="2.36", help="the oldest glibc the wheel promises (its manylinux tag)")
    args = ap.parse_args()
    for tool in ("patchelf", "readelf", "ldd"):
        if shutil.which(tool) is None:
            die("%s not found: install it (scripts/install-deps.sh lists patchelf and binutils)" % tool)
    m = re.match(r"^([^-]+)-([^-]+)-", os.path.basename(args.wheel))
    if not m or not args.wheel.endswith(".whl"):
        die("%s: not a wheel file name (NAME-VERSION-...whl)" % args.wheel)
    if not re.match(r"^2\.[0-9]+$", args.glibc):
        die("--glibc %s: expected 2.N" % args.glibc)
    tag = "py3-none-manylinux_%s_x86_64" % args.glibc.replace(".", "_")
    tmp = tempfile.mkdtemp(prefix="spw-wheel-")
    try:
        with zipfile.ZipFile(args.wheel) as z:
            z.extractall(tmp)
        flatten(tmp, m.group(1), m.group(2))
        renamed = bundle(tmp)
        most, others = check(tmp, args.glibc)
        out = repack(tmp, args.out_dir, m.group(1), m.group(2), tag)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = os.path.getsize(out)
    print("bundle_wheel: %s: %d libraries bundled in %s, %.1f MB; needs glibc %s (tag allows %s), %s"
          % (os.path.basename(out), len(set(renamed.values())), LIBS_DIR, size / 1e6, most, args.glibc, others or "no C++"))


if __name__ == "__main__":
    main()
