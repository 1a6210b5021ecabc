"""Install the repository's top-level folders under one ``sluice`` import namespace.

The repository keeps the design card's folders (``broker/``, ``pipeline/``, ``schemas/``,
``jobs/``) at its top; installed, they are ``sluice.broker``, ``sluice.pipeline``, … beside
``sluice.cli`` and ``sluice.common`` (the ``sluice/`` folder), so site-packages gains a single
top-level name. setuptools' ``package_dir`` maps each folder to its dotted name; an editable
install (``pip install -e .``) maps them with an import hook, a wheel copies them into place.
Everything else (metadata, dependencies, tool settings) is in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

FOLDERS = {
    "sluice": "sluice",
    "sluice.broker": "broker",
    "sluice.schemas": "schemas",
    "sluice.pipeline": "pipeline",
    "sluice.jobs": "jobs",
}

PACKAGES = [
    dotted
    for name, folder in FOLDERS.items()
    for dotted in [name, *(f"{name}.{sub}" for sub in find_packages(folder))]
]

setup(
    package_dir=FOLDERS,
    packages=PACKAGES,
    package_data={"sluice.schemas": ["*.avsc"]},
)
