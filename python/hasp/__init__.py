"""hasp: fenced locks, watches and KV on a hasp cluster, over libhasp.

    import hasp
    with hasp.Client() as client:              # $HASP_CLUSTER, $HASP_ID, $HASP_KEY_FILE
        with client.lock("jobs/nightly", ttl=5.0) as lease:
            if lease.safe(work=1.0):
                write(data, fence=lease.token)

docs/CLIENT.md "Python" is the manual.
"""
from .aio import AsyncClient, AsyncLock, AsyncWatch
from .client import Client, Event, Fence, KeyValue, Lock, LockInfo, Watch
from .errors import (Canceled, ClosedError, CompareFailed, ConfigError, Forbidden, HaspError,
                     InvalidArgument, LeaseExpired, LockBusy, LockLost, NotFound, NotHolder,
                     SessionExpired, Timeout)

__version__ = "0.1.0"
__all__ = [n for n in dir() if not n.startswith("_")]
