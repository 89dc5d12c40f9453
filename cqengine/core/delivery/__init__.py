"""A batch's second half at its DN, after the QNs: their reports gathered into alerts
(`reports`), and the alerts delivered to their homes (`delivery`)."""
