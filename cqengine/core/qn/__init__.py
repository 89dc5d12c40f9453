"""The QN: the runs of a batch that stopped in its region resolved with their DN, and
the matches reported (`qn`)."""
