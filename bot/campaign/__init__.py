"""A campaign: its wiring (setup), its loop, a candidate's steps, the judgement's extra runs,
the checks' calibration, the local executor and candidate recipe editing."""
