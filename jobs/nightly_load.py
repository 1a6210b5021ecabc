"""The nightly load as a Spark application (logic: ``sluice.pipeline.load.run``).

    spark-submit --master local[2] jobs/nightly_load.py --config conf/nightly_load.properties
    python -m sluice.jobs.nightly_load --config conf/nightly_load.properties [--override key=value]

On this machine the project is pip-installed (editable) into the venv whose ``python`` runs the
driver and the workers (set ``PYSPARK_PYTHON`` to it when calling spark-submit). On a cluster
ship the installed ``sluice`` package with the job instead, e.g.::

    pip install --no-deps --target /tmp/sluice-pkg /path/to/sluice
    (cd /tmp/sluice-pkg && zip -qr /tmp/sluice.zip sluice)
    spark-submit --master yarn --deploy-mode cluster --py-files /tmp/sluice.zip \\
        --files conf/nightly_load.properties jobs/nightly_load.py \\
        --config nightly_load.properties

(the driver plans the run with ``sluice.pipeline``, ``sluice.common`` and ``sluice.cli``;
executors need ``sluice.pipeline.source``, ``sluice.schemas`` with ``fastavro`` for Avro values
(``valueFormat=avro``), ``pyarrow`` and ``confluent-kafka``.) Under spark-submit its
``--master`` wins over the config's ``spark.master``. The module is only an entry point: the
load itself is ``sluice.pipeline.load.run``, its command line ``sluice.cli.load_command``.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as a file by spark-submit: make the repo importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sluice.cli.load_command import load_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(load_main())
