"""Sweeps: run a grid of one experiment's keys over seeds on Dask, into a campaign folder
that resumes (``airlink sweep``); tables and figures across the grid (``airlink sweep report``).

>>> from airlink.sweep import run_sweep, read_campaign      # doctest: +SKIP
>>> result = run_sweep("examples/sweeps/quick-schedulers.yaml", "campaigns/quick")
>>> result.frame.groupby("radio.scheduler")["summary.aggregate_throughput_mbps"].mean()
"""
from airlink.sweep.spec import Point, Sweep, SweepSpec, check_points, load_sweep, point_id
from airlink.sweep.campaign import SweepResult, input_files, read_campaign, run_sweep

__all__ = ["load_sweep", "check_points", "Sweep", "SweepSpec", "Point", "point_id", "run_sweep",
           "read_campaign", "SweepResult", "input_files"]
