"""One difference between two JSON Schemas, as Confluent's registry names, judges and words it.

A :class:`Difference` is Confluent's ``Difference.Type`` name and the JSON path where it was
found (``#/properties/name/maxLength``). :data:`COMPATIBLE_CHANGES` is Confluent's strict set
(``SchemaDiff.COMPATIBLE_CHANGES_STRICT``): a schema pair is compatible when every difference
found is in it. :meth:`Difference.message` is Confluent's ``Difference.toString()`` with the
reader's and the writer's roles filled in, as its ``SchemaValidatorBuilder`` does: the first
role named is the update's (the schema that reads).

Immutable; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPATIBLE_CHANGES = frozenset(
    [
        "ID_CHANGED",
        "DESCRIPTION_CHANGED",
        "TITLE_CHANGED",
        "DEFAULT_CHANGED",
        "SCHEMA_REMOVED",
        "TYPE_EXTENDED",
        "MAX_LENGTH_INCREASED",
        "MAX_LENGTH_REMOVED",
        "MIN_LENGTH_DECREASED",
        "MIN_LENGTH_REMOVED",
        "PATTERN_REMOVED",
        "MAXIMUM_INCREASED",
        "MAXIMUM_REMOVED",
        "MINIMUM_DECREASED",
        "MINIMUM_REMOVED",
        "EXCLUSIVE_MAXIMUM_INCREASED",
        "EXCLUSIVE_MAXIMUM_REMOVED",
        "EXCLUSIVE_MINIMUM_DECREASED",
        "EXCLUSIVE_MINIMUM_REMOVED",
        "MULTIPLE_OF_REDUCED",
        "MULTIPLE_OF_REMOVED",
        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
        "REQUIRED_ATTRIBUTE_REMOVED",
        "DEPENDENCY_ARRAY_NARROWED",
        "DEPENDENCY_ARRAY_REMOVED",
        "DEPENDENCY_SCHEMA_REMOVED",
        "MAX_PROPERTIES_INCREASED",
        "MAX_PROPERTIES_REMOVED",
        "MIN_PROPERTIES_DECREASED",
        "MIN_PROPERTIES_REMOVED",
        "ADDITIONAL_PROPERTIES_ADDED",
        "ADDITIONAL_PROPERTIES_EXTENDED",
        "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "MAX_ITEMS_INCREASED",
        "MAX_ITEMS_REMOVED",
        "MIN_ITEMS_DECREASED",
        "MIN_ITEMS_REMOVED",
        "UNIQUE_ITEMS_REMOVED",
        "ADDITIONAL_ITEMS_ADDED",
        "ADDITIONAL_ITEMS_EXTENDED",
        "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
        "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ENUM_ARRAY_EXTENDED",
        "COMBINED_TYPE_EXTENDED",
        "PRODUCT_TYPE_NARROWED",
        "SUM_TYPE_EXTENDED",
        "NOT_TYPE_NARROWED",
    ]
)

# Confluent's wording by group of types (Difference.error()); {update} and {original} are the
# roles ("new"/"old") of the update and the original.
_GROUPS = {
    "The keyword at path '{path}' in the {update} schema is not present in the {original} "
    "schema": """
        MAXIMUM_ADDED MINIMUM_ADDED EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MINIMUM_ADDED
        MULTIPLE_OF_ADDED MAX_LENGTH_ADDED MIN_LENGTH_ADDED PATTERN_ADDED
        REQUIRED_ATTRIBUTE_ADDED MAX_PROPERTIES_ADDED MIN_PROPERTIES_ADDED
        DEPENDENCY_ARRAY_ADDED DEPENDENCY_SCHEMA_ADDED MAX_ITEMS_ADDED MIN_ITEMS_ADDED
        UNIQUE_ITEMS_ADDED ADDITIONAL_ITEMS_REMOVED ADDITIONAL_PROPERTIES_REMOVED
    """,
    "The value at path '{path}' in the {update} schema is more than its value in the "
    "{original} schema": """
        MIN_LENGTH_INCREASED MINIMUM_INCREASED EXCLUSIVE_MINIMUM_INCREASED
        MIN_PROPERTIES_INCREASED MULTIPLE_OF_EXPANDED MIN_ITEMS_INCREASED
    """,
    "The value at path '{path}' in the {update} schema is less than its value in the "
    "{original} schema": """
        MAX_LENGTH_DECREASED MAXIMUM_DECREASED MAX_ITEMS_DECREASED EXCLUSIVE_MAXIMUM_DECREASED
        MAX_PROPERTIES_DECREASED
    """,
    "The value at path '{path}' is different between the {update} and {original} schema": """
        PATTERN_CHANGED MULTIPLE_OF_CHANGED DEPENDENCY_ARRAY_CHANGED
    """,
    "An array or combined type at path '{path}' has fewer elements in the {update} schema "
    "than the {original} schema": """
        ADDITIONAL_ITEMS_NARROWED ENUM_ARRAY_NARROWED SUM_TYPE_NARROWED
        ADDITIONAL_PROPERTIES_NARROWED
    """,
    "An array or combined type at path '{path}' has more elements in the {update} schema "
    "than the {original} schema": """
        DEPENDENCY_ARRAY_EXTENDED PRODUCT_TYPE_EXTENDED SUM_TYPE_EXTENDED NOT_TYPE_EXTENDED
    """,
    "A type at path '{path}' is different between the {update} schema and the {original} "
    "schema": """
        TYPE_CHANGED TYPE_NARROWED COMBINED_TYPE_CHANGED COMBINED_TYPE_SUBSCHEMAS_CHANGED
        ENUM_ARRAY_CHANGED
    """,
    "The {update} schema has an open content model and has a property or item at path "
    "'{path}' which is missing in the {original} schema": """
        REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
        REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL
        OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_OPEN_CONTENT_MODEL
    """,
    "The {update} schema has an unopen content model and has a required property at path "
    "'{path}' which is missing in the {original} schema": """
        REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    """,
    "The {update} has a closed content model and is missing a property or item present at "
    "path '{path}' in the {original} schema": """
        PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL
    """,
    "A property or item is missing in the {update} schema but present at path '{path}' in "
    "the {original} schema and is not covered by its partially open content model": """
        PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
        ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    """,
    "The {update} schema has a property or item at path '{path}' which is missing in the "
    "{original} schema and is not covered by its partially open content model": """
        PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
        ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    """,
}
_WORDING = {kind: wording for wording, kinds in _GROUPS.items() for kind in kinds.split()}


@dataclass(frozen=True)
class Difference:
    """One difference: Confluent's type name and the JSON path where it was found."""

    type: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.type in COMPATIBLE_CHANGES

    def message(self, *, update_role: str, original_role: str) -> str:
        """Confluent's ``{errorType:"…", description:"…"}`` for this difference."""
        wording = _WORDING.get(self.type, "")
        description = wording.format(path=self.path, update=update_role, original=original_role)
        return f'{{errorType:"{self.type}", description:"{description}"}}'
