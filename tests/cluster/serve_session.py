"""`perseus cluster serve` as a user runs it: start it, submit jobs over HTTP, stop it with
SIGINT while a job runs, start it again on the same database, and see every job finish.

Usage: serve_session.py PERSEUS DIR. Prints what it checked; exits 1 at the first failure."""
import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

PERSEUS, DIR = sys.argv[1], sys.argv[2]
TOKEN = "s3cret"


def fail(message):
    print("FAILED:", message)
    sys.exit(1)


def start():
    log = open(f"{DIR}/serve.log", "a")
    proc = subprocess.Popen([PERSEUS, "cluster", "serve", "--gpus", "k80:1,p100:1,v100:1", "--gpus-per-server", "1",
                             "--round", "60", "--speedup", "6000", "--port", "0", "--db", f"{DIR}/cluster.db",
                             "--token", TOKEN], stderr=log)
    deadline = time.time() + 20
    while time.time() < deadline:
        text = open(f"{DIR}/serve.log").read()
        ports = re.findall(r"event=listening .*port=(\d+)", text)
        if len(ports) > start.count:
            start.count += 1
            return proc, f"http://127.0.0.1:{ports[-1]}"
        if proc.poll() is not None:
            fail(f"the server exited {proc.returncode}: {text}")
        time.sleep(0.05)
    fail("the server did not start listening")


start.count = 0


def call(base, method, path, body=None, token=TOKEN):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def wait_for(base, predicate, what):
    deadline = time.time() + 30
    while time.time() < deadline:
        status, jobs = call(base, "GET", "/jobs")
        if predicate(jobs["jobs"]):
            return jobs["jobs"]
        time.sleep(0.05)
    fail(f"waited in vain for {what}: {jobs}")


proc, base = start()
status, body = call(base, "POST", "/jobs", {"type": "A3C x1", "steps": 1000}, token=None)
if status != 401:
    fail(f"a submission without the token got {status}")
status, body = call(base, "POST", "/jobs", {"type": "A3C x1", "steps": -3})
if status != 400 or "steps" not in body["detail"]:
    fail(f"a submission of -3 steps got {status} {body}")
# ~0.75 h on a V100 (A3C ~7 steps/s there) and ~4 h: 45 and 240 rounds of 60 s, 100 per second.
for steps in (20000, 100000):
    status, body = call(base, "POST", "/jobs", {"type": "A3C x1", "steps": steps})
    if status != 201:
        fail(f"a good submission got {status} {body}")
print("submitted 2 jobs; refused one without the token (401) and one of -3 steps (400)")
jobs = wait_for(base, lambda jobs: jobs[0]["status"] == "finished", "job 0 to finish")
print(f"job 0 finished, jct {jobs[0]['jct_s']} s; job 1 at {jobs[1]['steps_done']:.0f} steps")

proc.send_signal(signal.SIGINT)
if proc.wait(timeout=20) != 0:
    fail(f"the server exited {proc.returncode} on SIGINT")
proc, base = start()
status, body = call(base, "GET", "/jobs/1")
if status != 200 or body["steps_done"] <= 0:
    fail(f"job 1 after the restart: {status} {body}")
print(f"restarted: job 1 back at {body['steps_done']:.0f} steps")
jobs = wait_for(base, lambda jobs: jobs[1]["status"] == "finished", "job 1 to finish")
if jobs[1]["steps_done"] != 100000:
    fail(f"job 1 finished with {jobs[1]['steps_done']} steps")
status, allocation = call(base, "GET", "/allocation")
status, state = call(base, "GET", "/status")
print(f"job 1 finished after {state['rounds']} rounds; jobs {state['jobs']}")
proc.send_signal(signal.SIGTERM)
if proc.wait(timeout=20) != 0:
    fail(f"the server exited {proc.returncode} on SIGTERM")
print("OK")
