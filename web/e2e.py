#!/usr/bin/env python3
"""End-to-end test of the browser page: loads it in headless Chromium and
checks what it reports.

    python3 web/e2e.py [--sizes 1000,20000,100000] [--ops N] [--batch N] [--json OUT]

Needs web/www/pkg (web/build.sh) and Chromium. The page POSTs its result JSON
(the text of its <pre id=result>) to the server here; the test asserts that
gpuhash agreed with the JS Map oracle at every size, that every size ran with
positive figures, that bad arguments were refused with Errors, and reports the
WebGPU row as run or "skipped: <why>". A second load with ?inject=1 corrupts
one gpuhash result and must fail loudly, so the oracle check is known to bite.
"""

import argparse
import json
import math
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve import WWW, make_server  # noqa: E402

# WebGPU on a machine without a GPU: Chromium's SwiftShader Vulkan adapter.
WEBGPU_FLAGS = ["--enable-unsafe-webgpu", "--enable-features=Vulkan", "--use-webgpu-adapter=swiftshader", "--use-angle=swiftshader"]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("e2e: no Chromium found (apt-get install chromium)")


def load(url, timeout):
    """Opens url in headless Chromium; returns the JSON the page POSTs."""
    results = queue.Queue()
    server = make_server(0, results.put)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    profile = tempfile.mkdtemp(prefix="gpuhash-e2e-")
    cmd = [chromium(), "--headless=new", "--no-sandbox", "--no-first-run", "--disable-dev-shm-usage",
           f"--user-data-dir={profile}", *WEBGPU_FLAGS, f"http://127.0.0.1:{port}/{url}"]
    # Its own process group, so the browser's helper processes end with it.
    browser = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        body = results.get(timeout=timeout)
    except queue.Empty:
        err = browser.stderr.read1(8000).decode("utf-8", "replace") if browser.poll() is not None else ""
        sys.exit(f"e2e: FAILED: no result from the page within {timeout} s ({url}){chr(10) + err if err else ''}")
    finally:
        try:
            os.killpg(browser.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(browser.pid, signal.SIGKILL)
            browser.wait()
        server.shutdown()
        server.server_close()
        shutil.rmtree(profile, ignore_errors=True)
    return json.loads(body)


def check(cond, what):
    if not cond:
        sys.exit(f"e2e: FAILED: {what}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="2000,20000,100000", help="table sizes in keys (the page's default is the full run)")
    p.add_argument("--ops", type=int, default=100000, help="least operations per size")
    p.add_argument("--batch", type=int, default=1 << 20, help="most operations per round of bulk calls")
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait for each load")
    p.add_argument("--json", help="also write the page's result here")
    args = p.parse_args()
    check(os.path.exists(os.path.join(WWW, "pkg", "gpuhash_web.js")), "web/www/pkg is missing: run web/build.sh first")
    sizes = [int(s) for s in args.sizes.split(",")]

    t0 = time.time()
    r = load(f"?post=1&sizes={args.sizes}&ops={args.ops}&batch={args.batch}", args.timeout)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    print(f"e2e: {r.get('userAgent')}")
    check(r.get("status") == "ok", f"the page reports {r.get('status')}: {r.get('message')}")
    check([row["size"] for row in r["rows"]] == sizes, f"sizes run {[row['size'] for row in r['rows']]}, expected {sizes}")
    for row in r["rows"]:
        check(row["oracle"] == "agree" and row["mismatches"] == 0, f"{row['size']} keys: {row['mismatches']} mismatches: {row['examples']}")
        for k in ("gpuhash_mops", "map_mops", "set_mops"):
            check(isinstance(row[k], (int, float)) and math.isfinite(row[k]) and row[k] > 0, f"{row['size']} keys: {k} = {row[k]}")
        check(row["ops"] >= max(args.ops, 2 * row["size"]), f"{row['size']} keys: only {row['ops']} operations")
        print(f"e2e: {row['size']:>8} keys, {row['ops']:>8} ops: gpuhash-wasm {row['gpuhash_mops']:7.2f} Mops/s, "
              f"Map {row['map_mops']:6.2f}, Set {row['set_mops']:6.2f}; oracle agrees")
    bad = r.get("bad_input") or []
    check(bad and all(c["ok"] for c in bad), f"bad arguments not refused with an Error: {[c for c in bad if not c['ok']]}")
    print(f"e2e: {len(bad)} bad-argument checks threw Errors (no traps)")
    gpu = r.get("webgpu") or {}
    if gpu.get("ran"):
        for row in r["rows"]:
            check(row.get("webgpu_oracle") == "agree", f"WebGPU at {row['size']} keys: {row.get('webgpu_mismatches')} mismatches")
            check(row.get("webgpu_mops", 0) > 0, f"WebGPU at {row['size']} keys: no figure")
            print(f"e2e: {row['size']:>8} keys: gpuhash on WebGPU {row['webgpu_mops']:7.3f} Mops/s; oracle agrees")
        print(f"e2e: WebGPU ran on {gpu.get('gpuhash_adapter')}: {json.dumps(gpu.get('adapter'))}")
    else:
        check(gpu.get("skipped"), "the WebGPU row neither ran nor says why it was skipped")
        print(f"e2e: WebGPU adapter: {json.dumps(gpu.get('adapter'))}")
        print(f"e2e: gpuhash on WebGPU: skipped: {gpu['skipped']}")

    # The WebGPU table of another scheme: two-level cuckoo (HH Hash's layout,
    # on the portable kernels a browser runs), one size, against the oracle.
    if gpu.get("ran"):
        size = sizes[min(1, len(sizes) - 1)]
        tl = load(f"?post=1&scheme=two-level&sizes={size}&ops={size}&batch={args.batch}", args.timeout)
        check(tl.get("status") == "ok", f"two-level on WebGPU: the page reports {tl.get('status')}: {tl.get('message')}")
        row = tl["rows"][0]
        check(tl["webgpu"].get("scheme") == "two-level", f"the WebGPU table ran {tl['webgpu'].get('scheme')}, not two-level")
        check(row.get("webgpu_oracle") == "agree", f"two-level on WebGPU at {size} keys: {row.get('webgpu_mismatches')} mismatches")
        print(f"e2e: {size:>8} keys: two-level on WebGPU {row['webgpu_mops']:7.3f} Mops/s; oracle agrees")

    # The oracle check must bite: one corrupted lookup fails the page.
    bad_run = load(f"?post=1&inject=1&sizes={sizes[0]}&ops=1000&batch=1000", args.timeout)
    check(bad_run.get("status") == "mismatch" and bad_run["rows"][0]["mismatches"] >= 1,
          f"a corrupted result was not caught: status {bad_run.get('status')}")
    print(f"e2e: an injected wrong lookup was caught: {bad_run['rows'][0]['examples'][0]}")
    print(f"e2e: passed in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
