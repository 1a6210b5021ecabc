"""Compatibility runs: real clients' own test suites, unchanged, against Sluice brokers.

- ``run``     ``python -m tests.compat.run`` (``make compat``): kafka-python's integration
              suite against a standalone broker, then a three-broker cluster
- ``sdist``   the suite from kafka-python's PyPI sdist, plus the two files it leaves out
- ``service`` the ``test/service.py`` stand-in copied into the suite (never imported here)
- ``skips``   a pytest plugin: the suite's tests that cannot run against an external broker
- ``report``  JUnit XML to ``results.json`` and a Markdown table

Not installed (like ``bench``): run from the repository root. Above ``sluice.testing``, which
starts the brokers and ZooKeeper.
"""
