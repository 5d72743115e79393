"""What every binding's test suite shares under `hvdsparse run`: a failure on one rank must not
leave the others waiting in a collective, so a failing rank leaves at once (no orderly shutdown)
and its peers see a dead rank and fail too."""
import os
import sys


def pytest_sessionfinish(session, exitstatus):
    session.config._hvds_exitstatus = exitstatus


def pytest_unconfigure(config):
    status = getattr(config, "_hvds_exitstatus", 0)
    if status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(status))
