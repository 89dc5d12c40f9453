"""What tests share: oracle checks, workloads, live-ring helpers, waiting for a condition.

Test modules import their helpers from here, never from one another or from conftest.py
(which holds only fixtures), so a test module can move or go without breaking another.
"""
