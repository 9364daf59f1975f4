# tests/integration/wheel_probe.py - run by pip_package.sh with the Python of a foreign root (Debian 13, in a
# chroot) where the wheel is installed: imports spillway, runs a 160-image pipeline in-process or through a
# dispatcher, and prints one JSON line (elements, remote_elements, the library loaded, every shared object
# the process has mapped) for the test to judge. Not a test itself: it asserts nothing. One thread.
import json
import os
import sys

import spillway
import spillway._lib as L


def main():
    path = sys.argv[1]
    dispatcher = sys.argv[2] if len(sys.argv) > 2 else ""
    pipe = spillway.Pipeline.image_folder(path).decode_jpeg().center_crop(8).batch(32)
    with spillway.Loader(pipe, dispatcher=dispatcher) as ld:
        n = sum(b.n for b in ld)
        stats = ld.stats()
    with open("/proc/self/maps") as f:
        mapped = sorted({ln.split()[-1] for ln in f if ".so" in ln.split()[-1]})
    print(json.dumps({"glibc": os.confstr("CS_GNU_LIBC_VERSION"), "python": sys.version.split()[0],
                      "lib": L.lib()._name, "elements": n, "remote_elements": stats.get("remote_elements", 0),
                      "mapped": mapped}))


if __name__ == "__main__":
    main()
