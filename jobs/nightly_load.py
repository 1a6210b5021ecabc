"""The nightly load as a Spark application (logic: ``sluice.pipeline.load.run``).

    spark-submit --master local[2] jobs/nightly_load.py --config conf/nightly_load.properties
    python -m sluice.jobs.nightly_load --config conf/nightly_load.properties [--override key=value]

On this machine the project is pip-installed (editable) into the venv whose ``python`` runs the
driver; in local mode the load runs the executors' Python workers with it too. On a cluster
ship sluice with the job as a zip of the wheel (PySpark puts ``.zip`` files, not ``.whl``, on
the executors' ``sys.path``)::

    pip wheel --no-deps --wheel-dir dist .            # dist/sluice-<v>-py3-none-any.whl
    cp dist/sluice-*-py3-none-any.whl dist/sluice.zip
    spark-submit --master spark://spark-master:7077 --py-files dist/sluice.zip \
        --conf spark.pyspark.python=/usr/bin/python3 \
        jobs/nightly_load.py --config conf/nightly_load.properties

(or ``spark.submit.pyFiles`` in the config; or ``spark.archives`` with a packed virtualenv).
The executors' Python needs ``pyarrow`` and ``confluent-kafka`` (``fastavro`` too for
``valueFormat=avro``, ``jsonschema`` for ``json-schema``, ``protobuf`` and ``grpcio-tools`` for
``protobuf``) installed; the driver needs the whole ``sluice[spark]``. Under
spark-submit its ``--master`` wins over the config's ``spark.master``; without either Spark's
conventions decide (``sluice.pipeline.load.session``). The module is only an entry point: the
load itself is ``sluice.pipeline.load.run``, its command line ``sluice.cli.load_command``.
"""

from __future__ import annotations

import sys

from sluice.cli.load_command import load_main

if __name__ == "__main__":
    sys.exit(load_main())
