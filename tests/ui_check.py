"""The MLflow UI as a user sees it, in headless Chromium: `make ui-check` (after `make quick`).

Starts `mlflow server` on 127.0.0.1 against the quick study's store, opens the experiment, one
evaluate run and the compare view of one scenario's evaluate runs, saves a screenshot of each under
results/quick/ui-check/, and fails unless the compare page shows every policy's SLA rate. The page
text is Chromium's rendered DOM (`--dump-dom`): no WebDriver, no Python dependency beyond the
project's.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=4400,2600",  # all 15 policies side by side, and the metrics below the plots
    "--virtual-time-budget=30000",  # let the single-page app fetch and render
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(store: str, port: int) -> subprocess.Popen:
    mlflow = Path(sys.executable).with_name("mlflow")
    server = subprocess.Popen(
        [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
        + ["--backend-store-uri", store],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return server
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                os.killpg(server.pid, signal.SIGTERM)
                raise SystemExit("ui-check: mlflow server did not start") from None
            time.sleep(0.5)


def chromium(url: str, screenshot: Path) -> str:
    """Screenshot of `url` and its rendered DOM, each from a fresh, empty browser profile."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("ui-check: chromium not found (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        base = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        subprocess.run(
            [*base, f"--screenshot={screenshot}", url], check=True, capture_output=True, timeout=180
        )
    with tempfile.TemporaryDirectory() as profile:
        base = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        return subprocess.run(
            [*base, "--dump-dom", url], check=True, capture_output=True, text=True, timeout=180
        ).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="sqlite:///mlflow.db", help="MLflow store of make quick")
    parser.add_argument("--config", default=str(ROOT / "config" / "quick.yaml"))
    parser.add_argument("--scenario", default="mixed")
    parser.add_argument("--out", type=Path, default=Path("results/quick/ui-check"))
    args = parser.parse_args()

    import mlflow

    from relmas.config import load_config

    experiment_name = load_config(args.config)["experiment"]
    client = mlflow.MlflowClient(args.store)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        raise SystemExit(f"ui-check: no experiment {experiment_name!r} in {args.store}: make quick")
    runs = client.search_runs(
        [experiment.experiment_id],
        f"tags.stage = 'evaluate' and tags.scenario = '{args.scenario}'"
        " and tags.source = 'pipeline'",
        max_results=200,
    )
    # each policy's newest evaluate run: a rerun after an interruption redoes only some jobs
    newest = {}
    for run in sorted(runs, key=lambda run: run.info.start_time):
        newest[run.data.tags["policy"]] = run
    runs = list(newest.values())
    if not runs:
        raise SystemExit(f"ui-check: no evaluate runs of {args.scenario!r} in {experiment_name}")
    sla = {run.data.tags["policy"]: run.data.metrics["sla_rate"] for run in runs}
    ids = [run.info.run_id for run in runs]
    one = next((run for run in runs if run.data.tags["policy"] == "relmas"), runs[0])

    port = free_port()
    server = start_server(args.store, port)
    base = f"http://127.0.0.1:{port}/#"
    exp = experiment.experiment_id
    # the UI opens on its GenAI pages unless told this is model training
    mode = {"workflowType": "machine_learning"}
    search = {"searchFilter": f"tags.stage = 'evaluate' and tags.scenario = '{args.scenario}'"}
    compare = {"runs": json.dumps(ids), "experiments": json.dumps([exp])}
    pages = {
        "experiment": f"/experiments/{exp}/runs?" + urllib.parse.urlencode(mode | search),
        "evaluate-run": f"/experiments/{exp}/runs/{one.info.run_id}?"
        + urllib.parse.urlencode(mode),
        "compare": "/compare-runs?" + urllib.parse.urlencode(compare | mode),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    texts = {}
    try:
        for name, path in pages.items():
            texts[name] = chromium(base + path, args.out / f"{name}.png")
            (args.out / f"{name}.html").write_text(texts[name])
            print(f"{name}: {args.out / f'{name}.png'}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    shown = sla_rates_shown(page_text(texts["compare"]))
    missing = [
        f"{policy} ({value:.4g}, shown: {shown.get(policy)})"
        for policy, value in sorted(sla.items())
        if policy not in shown or not math.isclose(shown[policy], value, abs_tol=5e-4)
    ]
    if missing:
        raise SystemExit(f"ui-check: the compare page does not show the SLA rate of {missing}")
    print(f"ui-check: the compare page shows the SLA rate of all {len(sla)} policies")


def page_text(dom: str) -> str:
    """The words of a rendered page, as a reader sees them in order."""
    dom = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


def sla_rates_shown(text: str) -> dict[str, float]:
    """Policy -> the value in the `sla_rate` row of the compare page's metrics table.

    The table renders as the run names (`evaluate-<scenario>-<policy>-<seeds>`), then the metric
    names, then the values row by row, one per run column the page shows."""
    names = text.split("Run Name:", 1)[1].split("Start Time:", 1)[0].split()
    policies = [name.split("-")[2] for name in names]
    words = text.split("Metrics Show diff only", 1)[1].split("Artifacts", 1)[0].split()
    metrics = [w for w in words if not _number(w)]
    values = words[len(metrics) :]
    if "sla_rate" not in metrics or not values:
        return {}
    columns = len(values) // len(metrics)
    row = metrics.index("sla_rate")
    return {
        p: float(v)
        for p, v in zip(policies, values[row * columns : (row + 1) * columns], strict=False)
    }


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


if __name__ == "__main__":
    main()
