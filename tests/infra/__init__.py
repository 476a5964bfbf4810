"""Tests of infra/: the lab files (compose, Slurm, accelerate) checked with real tools."""
