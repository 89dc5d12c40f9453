"""Progress lines: how far a long command is, how fast it goes, and how long it has left."""

import io

import pytest

from cqengine import progress
from cqengine.progress import Progress, duration


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0, "0s"),
        (42.4, "42s"),
        (59.6, "1m00s"),
        (185, "3m05s"),
        (3599, "59m59s"),
        (3720, "1h02m"),
        (90_000, "25h00m"),
    ],
)
def test_a_duration_reads_as_seconds_minutes_or_hours(seconds, text):
    assert duration(seconds) == text


def test_a_line_says_how_long_is_left_at_the_pace_so_far(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()  # not a terminal: a line every `every` seconds
    bar = Progress("publishing", 1000, out=out, every=5)
    clock[0] += 1
    bar.update(10, 10)  # too soon after the start: nothing yet
    assert out.getvalue() == ""
    clock[0] += 59
    bar.update(250, 250)  # a quarter in 60 s: three quarters take 180 s more
    assert out.getvalue() == f"publishing: [{'#' * 7:<30}]  25% 250 docs (4/s, 3m00s left)\n"
    clock[0] += 10
    bar.update(260)  # nothing known of the total's progress: no bar, no estimate
    assert out.getvalue().splitlines()[-1] == "publishing: 260 docs (4/s)"
