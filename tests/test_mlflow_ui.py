"""MLflow's UI in a real headless browser against ``make serve``'s MLflow server (artifacts in its S3): two stage
runs, logged the way the stages log them, compared side by side.

Checks what a user sees: the experiment opens in the model-training view (its runs), not in MLflow 3's GenAI
overview; the compare view of two runs shows their GFLOPS / WinRate metrics and hpcrl's params by params.yaml section,
with none of TRL's raw TrainingArguments among them. The metric names are the ones ``evaluate_dgemm`` logs.

Tools: Debian's ``chromium`` and ``chromium-driver`` (the Makefile's APT_PACKAGES) and the ``selenium`` package (a dev
dependency); selenium drives the system chromedriver, so nothing is downloaded. A missing tool fails the test with
that hint; nothing is skipped (as in ``tests/infra``).

Run: ``pytest -m integration tests/test_mlflow_ui.py`` (~70 s on 2 cores, most of it the stack starting: marked
``slow``, so ``make test-slow`` runs it, the default run does not). Refresh the screenshot in the docs with
``HPCRL_UI_SCREENSHOT=docs/img/mlflow-compare.png pytest -m integration tests/test_mlflow_ui.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flows.serve import read_env_file
from flows.service import free_port
from hpcrl_core import tracking
from tests.flows.test_deployment import base_env, kill_leftovers, serve

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # ~70 s: the stack, a browser, page loads

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
# what works on these machines: without the background-networking flags, connections are refused in bulk
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1400")
WAIT_S = 30.0


@pytest.fixture(scope="module")
def mlflow_ui_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The MLflow server of ``make serve`` (``python -m flows.serve start``: S3, MLflow with artifacts in S3, Prefect,
    workers, an agent) on free ports with a private PREFECT_HOME; stopped afterwards, nothing left running."""
    root = tmp_path_factory.mktemp("stack")
    home = root / "prefect-home"
    env = base_env(home)
    ports = [free_port() for _ in range(3)]
    try:
        serve(env, "start", "--port", str(ports[0]), "--mlflow-port", str(ports[1]), "--s3-port", str(ports[2]),
              "--env-file", str(root / "serve.env"))
        yield read_env_file(root / "serve.env")["MLFLOW_TRACKING_URI"]
    finally:
        stopped = serve(env, "stop", check=False)
        left = kill_leftovers(home)
    assert stopped.returncode == 0 and left == [], stopped.stdout + stopped.stderr


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail("chromium or chromedriver is not installed; install them with: "
                    "sudo apt-get install chromium chromium-driver (or `make setup`)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is not installed; install it with: .venv/bin/pip install -e '.[dev]' (or `make setup`)")

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))  # a driver path: no download
    try:
        yield driver
    finally:
        driver.quit()


def _stage_run(url: str, seed: int, learning_rate: float, gflops: float, winrate: float) -> str:
    """One ``rl_dgemm`` run as the stage makes it: params by section, the trainer's MLflow callback set up with TRL's
    arguments, evaluation metrics. Returns its id."""
    from transformers import Qwen2Config, TrainerState
    from trl import GRPOConfig

    from hpcrl_core.training.mlflow_callback import HpcrlMLflowCallback

    params = {"rl_dgemm": {"learning_rate": learning_rate, "seed": seed, "loss_type": "dapo"},
              "reward": {"correct_scale": 10.0}, "bench": {"repeats": 5}}
    args = GRPOConfig(output_dir="unused", report_to=[], learning_rate=learning_rate, seed=seed, use_cpu=True,
                      bf16=False)
    model = type("Model", (), {"config": Qwen2Config(hidden_size=64, num_hidden_layers=2)})()
    with tracking.dvc_stage_run("rl_dgemm", params=params, tracking_uri=url, method="dapo") as run:
        HpcrlMLflowCallback().setup(args, TrainerState(), model)
        tracking.log_metrics({"rl": {"gflops_median": gflops, "winrate_vs_sft": winrate}})
    return str(run.info.run_id)


@pytest.fixture(scope="module")
def two_runs(mlflow_ui_url: str) -> tuple[str, list[str]]:
    """(experiment id, [run ids]) of two seeds of rl_dgemm on the server."""
    import mlflow

    prior = os.environ.get("MLFLOW_TRACKING_URI")
    try:
        ids = [_stage_run(mlflow_ui_url, 1, 1e-4, 12.5, 0.625), _stage_run(mlflow_ui_url, 2, 3e-4, 31.75, 0.875)]
        experiment = mlflow.MlflowClient(mlflow_ui_url).get_experiment_by_name(tracking.EXPERIMENT).experiment_id
    finally:
        mlflow.set_tracking_uri(prior)  # type: ignore[arg-type]  # None: back to the environment's default
    return experiment, ids


def _wait_for(browser: Any, what: str, ready: Callable[[str], bool]) -> str:
    """The page's text once ``ready(text)`` holds; fails with what was on the page after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    text = ""
    while time.monotonic() < deadline:
        text = browser.find_element("tag name", "body").text
        if ready(text):
            return str(text)
        time.sleep(0.25)
    pytest.fail(f"{what}: not there after {WAIT_S} s at {browser.current_url}; the page said:\n{text[:3000]}")


def test_the_experiment_opens_in_the_model_training_view(browser: Any, mlflow_ui_url: str,
                                                         two_runs: tuple[str, list[str]]) -> None:
    experiment, _ = two_runs
    browser.get(tracking.experiment_url(mlflow_ui_url, experiment))
    text = _wait_for(browser, "the runs table", lambda t: "2 matching runs" in t and t.count("rl_dgemm") >= 2)
    assert re.search(rf"#/experiments/{experiment}/runs\?", browser.current_url)  # not .../overview (GenAI)
    assert "workflowType=machine_learning" in browser.current_url
    assert "Token Usage" not in text and "No data available" not in text  # what the GenAI overview shows


def test_the_compare_view_shows_metrics_and_hpcrl_params_by_section(browser: Any, mlflow_ui_url: str,
                                                                     two_runs: tuple[str, list[str]],
                                                                     tmp_path: Path) -> None:
    experiment, runs = two_runs
    browser.get(tracking.compare_url(mlflow_ui_url, runs, [experiment]))
    text = _wait_for(browser, "the compared metrics", lambda t: "Comparing 2 Runs" in t and "winrate_vs_sft" in t)
    params = text[text.index("Parameters\nShow diff only"):text.index("\nMetrics\n", text.index("Show diff only"))]
    metrics = text[text.index("\nMetrics\n", text.index("Show diff only")):text.index("\nArtifacts")]
    # two grids: the metric names, then their values row by row (a column per run, in the order of the runs)
    lines = metrics.splitlines()[3:]
    names = [line for line in lines if line.startswith("rl.")]
    values = [line for line in lines if not line.startswith("rl.")]
    shown = {name: values[2 * i:2 * i + 2] for i, name in enumerate(names)}
    assert shown == {"rl.gflops_median": ["12.5", "31.75"], "rl.winrate_vs_sft": ["0.625", "0.875"]}, metrics
    keys = [line.split()[0] for line in params.splitlines()[2:] if line.strip()]
    assert keys[:1] == ["bench.repeats"] and {"rl_dgemm.learning_rate", "reward.correct_scale"} <= set(keys)
    assert all(k.split(".")[0] in ("bench", "reward", "rl_dgemm") for k in keys), keys  # TRL's args are not params
    assert "accelerator_config" not in text and "_name_or_path" not in text
    shot = Path(os.environ.get("HPCRL_UI_SCREENSHOT", tmp_path / "mlflow-compare.png"))
    assert _screenshot(browser, shot).stat().st_size > 10_000


def _screenshot(browser: Any, path: Path) -> Path:
    """The compare view as the docs show it: the assistant panel closed, tall enough for the metrics, the parallel
    coordinates plot drawn."""
    for close in browser.find_elements("css selector", "[data-component-id='mlflow.assistant.chat_panel.close']"):
        close.click()
    browser.set_window_size(1400, 2000)
    deadline = time.monotonic() + WAIT_S
    while not browser.find_elements("css selector", ".js-plotly-plot svg.main-svg") and time.monotonic() < deadline:
        time.sleep(0.25)
    time.sleep(1.0)  # the plot's transition
    assert browser.save_screenshot(str(path))
    return path
