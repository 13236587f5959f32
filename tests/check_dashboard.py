#!/usr/bin/env python3
"""Runs cmake/ctest/dashboard.cmake against a CDash stand-in on 127.0.0.1 and checks what arrives.

The receiver speaks CDash's submission protocol as ctest uses it: each file is an HTTP PUT (or
POST) to submit.php?project=...&FileName=...&MD5=..., answered with CDash's XML status carrying
the MD5 of what was received (ctest checks it). The dashboard builds one unit test of a2sgd with
coverage (and, where valgrind exists, memcheck of its 1-rank run), and the check requires that
Configure.xml, Build.xml, Test.xml and Coverage.xml arrive, parse, and say what happened: the
test ran and passed, the library's own sources have covered lines.

Usage: check_dashboard.py <source dir> <work dir> [ctest] [launcher flags]
(the outer build's MPIEXEC_PREFLAGS as one space-separated word: where it allows Open MPI to run as
root, as the Spack recipe's does, the dashboard's own build, which has the default flags, gets the
same permission through Open MPI's environment variables)
"""
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse
import xml.etree.ElementTree as ET

SOURCE, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
CTEST = sys.argv[3] if len(sys.argv) > 3 else "ctest"
INBOX = os.path.join(WORK, "inbox")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(INBOX)
received = []


class CDash(http.server.BaseHTTPRequestHandler):
    def _receive(self):
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        md5 = hashlib.md5(body).hexdigest()
        name = query.get("FileName", ["unnamed"])[0]
        status = "OK"
        if query.get("project", [""])[0] != "a2sgd" or ("MD5" in query and query["MD5"][0] != md5):
            status = "ERROR"
        else:
            # FileName is <site>___<build>___<stamp>-<model>___XML___<Part>.xml
            with open(os.path.join(INBOX, name.split("___")[-1]), "wb") as f:
                f.write(body)
            received.append(name)
        reply = (f'<cdash version="3.0"><status>{status}</status><message></message>'
                 f"<md5>{md5}</md5></cdash>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_PUT = do_POST = _receive

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CDash)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_address[1]}/submit.php?project=a2sgd"

# The one unit test the dashboard builds and runs (quick to build, and to run under valgrind), and
# the library source it must cover.
UNIT, UNIT_SOURCE = "test_a2sgd_exchange", "a2sgd/compress/A2sgdExchange.cpp"
memcheck = shutil.which("valgrind") is not None
env = dict(os.environ, A2SGD_CDASH_SUBMIT_URL=url)
if len(sys.argv) > 4 and "--allow-run-as-root" in sys.argv[4].split():
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
command = [CTEST, "-S", os.path.join(SOURCE, "cmake", "ctest", "dashboard.cmake"), "-VV",
           f"-DDASHBOARD_SOURCE_DIR={SOURCE}", f"-DDASHBOARD_BINARY_DIR={os.path.join(WORK, 'build')}",
           "-DCTEST_SITE=a2sgd-test", "-DCTEST_BUILD_NAME=dashboard-check",
           "-DDASHBOARD_CONFIGURE_OPTIONS=-DA2SGD_ENABLE_APPS=OFF;-DA2SGD_TEST_RANKS=1;"
           "-DA2SGD_PORTABILITY_BLAS_CORES=;-DA2SGD_ENABLE_HOST_CLONES=OFF",
           f"-DDASHBOARD_BUILD_TARGET={UNIT}", f"-DDASHBOARD_TEST_INCLUDE=^{UNIT}_np1$",
           "-DDASHBOARD_COVERAGE=ON", f"-DDASHBOARD_MEMCHECK={'ON' if memcheck else 'OFF'}"]
run = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
server.shutdown()
log = run.stdout
with open(os.path.join(WORK, "ctest-S.log"), "w") as f:
    f.write(log)
failures = []
if run.returncode != 0:
    failures.append(f"ctest -S exited with {run.returncode}:\n{log[-4000:]}")

parts = {}
for part in ["Configure.xml", "Build.xml", "Test.xml", "Coverage.xml", "Done.xml"] + (
        ["DynamicAnalysis.xml"] if memcheck else []):
    path = os.path.join(INBOX, part)
    if not os.path.exists(path):
        failures.append(f"{part} did not arrive (received: {sorted(os.listdir(INBOX))})")
        continue
    try:
        parts[part] = ET.parse(path).getroot()
    except ET.ParseError as e:
        failures.append(f"{part} does not parse: {e}")

if "Configure.xml" in parts and parts["Configure.xml"].findtext(".//ConfigureStatus") != "0":
    failures.append("Configure.xml reports a failed configure")
if "Build.xml" in parts and parts["Build.xml"].findall(".//Error"):
    failures.append("Build.xml reports build errors")
if "Test.xml" in parts:
    tests = {t.findtext("Name"): t.get("Status") for t in parts["Test.xml"].iter("Test") if t.get("Status")}
    if tests != {f"{UNIT}_np1": "passed"}:
        failures.append(f"Test.xml: expected {UNIT}_np1 passed, got {tests}")
if "Coverage.xml" in parts:
    covered = {f.get("FullPath"): int(f.findtext("LOCTested") or 0) for f in parts["Coverage.xml"].iter("File")}
    ours = {p: n for p, n in covered.items() if p and UNIT_SOURCE in p}
    if not ours or max(ours.values()) == 0:
        failures.append(f"Coverage.xml has no covered line of src/{UNIT_SOURCE} ({len(covered)} files)")
    if any("/tests/" in p for p in covered if p):
        failures.append("Coverage.xml counts the tests' own sources")
if memcheck and "DynamicAnalysis.xml" in parts:
    names = [t.findtext("Name") for t in parts["DynamicAnalysis.xml"].iter("Test")]
    if f"{UNIT}_np1" not in names:
        failures.append(f"DynamicAnalysis.xml does not list the memcheck of {UNIT}_np1: {names}")

for message in failures:
    print("FAIL:", message)
if failures:
    sys.exit(1)
print(f"received and parsed: {', '.join(sorted(parts))} ({len(received)} uploads to {url})")
