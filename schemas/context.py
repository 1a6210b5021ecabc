"""Schema contexts: separate id spaces inside one registry, named in the subject.

A subject ``:.payments:orders-value`` is the subject ``orders-value`` of the context
``.payments``; a plain ``orders-value`` (or ``:.:orders-value``) is in the default context
``.``. Each context has its own schema ids (id 1 of ``.payments`` is not id 1 of ``.``), as in
Confluent's registry, which migration tools use to import another registry's schemas with
their ids without meeting this registry's. Subjects, versions, configs and modes are keyed by
the qualified name (the default context's subjects keep their plain names), and a context's
own config and mode are those of ``:.ctx:`` (a subject without a name), which its subjects
follow before the global ones; a reference's unqualified subject is in the referring schema's
context.

Pure functions; thread-safe.
"""

from __future__ import annotations

from sluice.schemas.errors import InvalidSubjectError

DEFAULT_CONTEXT = "."
_PREFIX = ":."


def split_subject(subject: str) -> tuple[str, str]:
    """``":.ctx:name"`` → ``(".ctx", "name")``; ``"name"`` and ``":.:name"`` →
    ``(".", "name")``. 42208 for a ``:.`` prefix without the closing ``:``."""
    if not subject.startswith(_PREFIX):
        return DEFAULT_CONTEXT, subject
    context, sep, name = subject[1:].partition(":")
    if not sep:
        raise InvalidSubjectError(
            f"The specified subject {subject!r} is not valid: expected ':.context:subject'"
        )
    return context, name


def qualify(context: str, name: str) -> str:
    """The subject ``name`` of ``context`` as the registry keys it."""
    return name if context == DEFAULT_CONTEXT else f":{context}:{name}"


def normalize(subject: str) -> str:
    """The key of a subject as a request names it (``:.:name`` is ``name``)."""
    return qualify(*split_subject(subject))


def context_of(subject: str) -> str:
    return split_subject(subject)[0]


def scopes(subject: str) -> list[str | None]:
    """Where a subject's config and mode are looked up, nearest first: the subject itself, its
    context (``:.ctx:``, a subject without a name) unless that is the default, then global
    (``None``)."""
    context, name = split_subject(subject)
    found: list[str | None] = [subject]
    if context != DEFAULT_CONTEXT and name:
        found.append(qualify(context, ""))
    return [*found, None]


def reference_subject(subject: str, referrer_context: str) -> str:
    """The key of a reference's subject: qualified as given, else in the referrer's context."""
    if subject.startswith(_PREFIX):
        return normalize(subject)
    return qualify(referrer_context, subject)
