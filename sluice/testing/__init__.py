"""Test support in one place: real servers on 127.0.0.1 for tests, demos and benchmarks.

Everything here starts *real* processes — the ones users run — and talks to them the way
users do, over TCP with real clients. Modules, each named after what it holds:

- ``ci``          whether this run is CI (where a missing dependency fails instead of skipping)
- ``net``         ``free_port``, ``port_open``, ``wait_for_port`` and ``wait_until`` (polling)
- ``process``     ``ChildProcess``: a command as a child process, output to a file, SIGTERM or
                  SIGKILL, always cleaned up (the base of every process class below)
- ``zookeeper``   ``ZooKeeperServer`` (Debian's ``zookeeper.jar``), chroots, kazoo clients
- ``broker``      ``BrokerProcess`` (``python -m sluice broker start``), standalone or cluster
                  mode; ``create_topic``
- ``cluster``     ``BrokerCluster``: N broker processes on one ZooKeeper chroot
- ``registry``    ``RegistryProcess`` (``python -m sluice registry start``)
- ``mirror``      ``MirrorProcess`` (``python -m sluice mirror run``)
- ``prometheus``  reading a ``/metrics`` endpoint back
- ``spark``       ``spark_submit``: a job in ``local[2]`` with Spark's log noise filtered
- ``spark_cluster`` ``SparkCluster``: a Spark standalone master and workers as separate JVMs,
                  workers in their own mount namespace with private paths; executor and
                  worker faults
- ``netns``       brokers in network namespaces on a bridge; partitions cut and healed with tc
- ``faults``      the soak's faults: kills, ZooKeeper restarts, session expiry, partitions,
                  a slow disk
- ``slow_disk``   ``SlowDisk``: a FUSE passthrough whose fsync waits (the slow-disk fault)
- ``certificates`` a test CA, a server certificate for 127.0.0.1/localhost and a client one
- ``console``     ``step``: the headline a demo prints before each step

Layering: above ``sluice.broker``, ``sluice.schemas`` and ``sluice.pipeline`` (it may import
them), beside ``sluice.cli`` (neither imports the other), below ``sluice.jobs``. Only tests
(``tests.compat`` included), ``bench`` and ``sluice.jobs`` (the demos) import it. pytest is
never imported here: fixtures stay in the ``conftest.py`` files, which decide whether a
missing dependency skips or fails.

Thread-safety: a process object is driven by one thread (start, stop, kill, restart); the
read-only properties (``bootstrap``, ``port``, ``url``) may be read from any thread.
"""
