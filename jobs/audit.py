"""The audit as a Spark application (logic: ``sluice.pipeline.audit.run``).

    spark-submit --master local[2] jobs/audit.py --config conf/audit.properties [--until T]
    python -m sluice.jobs.audit --config conf/audit.properties [--override key=value]

Exit status: 0 every closed window agrees, 1 some closed window differs or the audit failed,
2 bad configuration, 3 a service did not answer (a cluster, the registry, the Iceberg catalog,
the Spark master; each is checked before the SparkSession starts). As for
``jobs/nightly_load.py``: set ``PYSPARK_PYTHON`` to the venv's python on this machine; on a
cluster ship the installed ``sluice`` package with ``--py-files`` (executors need
``sluice.pipeline`` and ``sluice.schemas`` with ``fastavro``, ``pyarrow``, ``confluent-kafka``;
the driver also ``matplotlib`` for ``audit.png``). Under spark-submit its ``--master`` wins over
the config's ``spark.master``.
"""

from __future__ import annotations

import sys

from sluice.cli.audit_command import audit_main

if __name__ == "__main__":
    sys.exit(audit_main())
