"""Fixtures for the tests against a real cluster.

tests/python_cluster.sh (meson test python_cluster) starts a local cluster
in a network namespace of its own and runs pytest inside it with
HASP_CLUSTER, HASP_ID, HASP_KEY_FILE and HASP_LIBRARY set.
"""
import os
import time
import uuid

import pytest

import hasp

# Each request's deadline: generous, the test machine is loaded (a liveness
# bound, never a timing assertion).
DEADLINE = 30.0


@pytest.fixture(scope="session")
def cluster():
    addrs = os.environ.get("HASP_CLUSTER")
    if not addrs:
        pytest.fail("HASP_CLUSTER is not set: run through meson test python_cluster "
                    "(tests/python_cluster.sh) or inside `scripts/cluster exec`")
    return addrs


@pytest.fixture
def client(cluster):
    c = hasp.Client(cluster, deadline=DEADLINE)
    yield c
    c.close()


@pytest.fixture
def other(cluster):
    c = hasp.Client(cluster, deadline=DEADLINE)
    yield c
    c.close()


@pytest.fixture
def name():
    """A name no other test uses."""
    return "py/" + uuid.uuid4().hex[:12]


def eventually(predicate, limit=30.0, step=0.02):
    """Polls until predicate() is true. `limit` is a liveness bound (a
    hung cluster fails the test instead of hanging it), not a timing
    assertion."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
