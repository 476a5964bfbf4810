"""The ``hpcrl`` command line.

    hpcrl config check [PATH]                 validate params.yaml; every problem with its key path
    hpcrl bench FILE... [--n N] [--json]      benchmark kernel files (or model completions)
    hpcrl bench --reference [--json]          measure this node: naive, best shipped kernel, numpy, peak
    hpcrl bench --ladder                      benchmark the shipped kernel ladder
    hpcrl bench FILE... --backend agents      the same, timed by CPU agents (flows/cli.py: agent, status)

Test: ``pytest tests/test_cli.py``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.config import DEFAULT_PARAMS, BenchParams, Params, Settings, load_params
from hpcrl_core.errors import HPCRLError


def _cmd_config_check(args: argparse.Namespace) -> int:
    path = Path(args.path)
    try:
        params = load_params(path)
    except HPCRLError as err:
        print(f"config check failed: {err}", file=sys.stderr)
        return 1
    sections = ", ".join(type(params).model_fields)
    print(f"{path}: valid (sections: {sections})")
    return 0


def _load(args: argparse.Namespace) -> Params:
    path = Path(args.params)
    if not path.exists() and args.params == str(DEFAULT_PARAMS):
        return Params()  # embedded defaults when run outside a project folder
    return load_params(path)


def _cmd_bench(args: argparse.Namespace) -> int:
    from hpcrl_core.cli_bench import run_bench_command

    if not args.files and not args.reference and not args.ladder:
        print("hpcrl bench: give kernel FILEs, --reference or --ladder (see --help)", file=sys.stderr)
        return 2
    if args.report and not args.reference:
        print("hpcrl bench: --report needs --reference", file=sys.stderr)
        return 2
    params = _load(args)
    overrides: dict[str, Any] = {}
    if args.n:
        overrides["n"] = args.n
    if args.no_cache:
        overrides["cache"] = False
    if args.cores_per_slot:
        overrides["executor"] = params.bench.executor.model_copy(update={"cores_per_slot": args.cores_per_slot})
    bench = params.bench.model_copy(update=overrides)
    # model_copy skips validation; re-validate so overrides obey the same rules as params.yaml (only bench changed,
    # and only bench is read: the dvc stage node_reference lists that section alone)
    params = params.model_copy(update={"bench": BenchParams.model_validate(bench.model_dump())})
    settings = Settings(bench_backend=args.backend) if args.backend else Settings()
    return run_bench_command(params, settings, files=[Path(f) for f in args.files], reference=args.reference,
                             ladder=args.ladder, as_json=args.json, report=Path(args.report) if args.report else None)


def build_parser() -> argparse.ArgumentParser:
    """The core commands; ``flows/cli.py`` (the installed ``hpcrl``) adds those that need Prefect."""
    ap = argparse.ArgumentParser(prog="hpcrl", description="Post-train language models on HPC work with rewards "
                                 "measured on real machines.")
    sub = ap.add_subparsers(dest="command", required=True)

    cfg = sub.add_parser("config", help="configuration commands")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True)
    check = cfg_sub.add_parser("check", help="validate a params.yaml and list every problem")
    check.add_argument("path", nargs="?", default=str(DEFAULT_PARAMS), help="params file (default: params.yaml)")
    check.set_defaults(func=_cmd_config_check)

    bench = sub.add_parser("bench", help="compile, verify and time DGEMM kernels on this node",
                           description="Benchmark C DGEMM kernels: void dgemm(int n, const double *A, "
                           "const double *B, double *C), row-major, C = A*B.")
    bench.add_argument("files", nargs="*", help="kernel sources or model completions (fenced C blocks)")
    bench.add_argument("--n", type=int, help="matrix size (default: bench.n)")
    bench.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    bench.add_argument("--reference", action="store_true",
                       help="measure this node: naive kernel, best shipped kernel, numpy's DGEMM, peak estimate")
    bench.add_argument("--ladder", action="store_true", help="benchmark every shipped reference kernel")
    bench.add_argument("--report", metavar="PATH", help="with --reference: also write the figures as JSON metrics")
    bench.add_argument("--params", default=str(DEFAULT_PARAMS), help="params file (default: params.yaml)")
    bench.add_argument("--no-cache", action="store_true", help="measure again even if a result is cached")
    bench.add_argument("--cores-per-slot", type=int, help="cores per timed run (default: bench.executor)")
    bench.add_argument("--backend", choices=("local", "agents"),
                       help="where kernels are timed: this machine, or CPU agents through PREFECT_API_URL "
                       "(default: HPCRL_BENCH_BACKEND, else local)")
    bench.set_defaults(func=_cmd_bench)
    return ap


def main(argv: Sequence[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    args = (parser or build_parser()).parse_args(argv)
    try:
        return int(args.func(args))
    except HPCRLError as err:
        print(f"hpcrl: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hpcrl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())


