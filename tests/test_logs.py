"""The pace of a job's work (``fedrepro.logs.Pace``) and how its lines show time and rate."""

from __future__ import annotations

from fedrepro.logs import Pace, duration, rate


def test_the_time_left_goes_by_the_work_done_and_leaves_out_work_found_done():
    """A job of 3 runs × 10 rounds whose first run was kept (skipped: off the total, not
    done) has done 5 rounds in 50 s: 15 rounds left, 150 s at its pace."""
    pace = Pace(30, start=0.0)
    assert pace.eta(now=10.0) is None  # nothing done yet: no pace
    pace.skip(10)
    pace.add(5)
    assert pace.left() == 15 and pace.eta(now=50.0) == 150.0
    assert pace.text("rounds", now=50.0) == "0.1 rounds/s, eta 2m30s"
    assert Pace(0, start=0.0).eta(now=1.0) is None  # an unknown total: a rate only


def test_durations_and_rates_read_at_a_glance():
    assert [duration(s) for s in (0.4, 12, 185, 3725)] == ["0s", "12s", "3m05s", "1h02m"]
    assert rate(96.77, "bytes") == "96.8 B/s" and rate(2.5e6, "bytes") == "2.5 MB/s"
    assert rate(999.7, "bytes") == "1 kB/s" and rate(12_345, "images") == "12,345 images/s"
