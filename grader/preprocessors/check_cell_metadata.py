"""nbgrader's check of every cell's nbgrader metadata, with the schema's validator made once.

`jsonschema.validate`, which nbgrader calls for each cell, first checks the schema itself
against its meta-schema: 0.1 s a notebook, and autograde checks each submission twice. The
checks stay nbgrader's own (versions, the schema, grade ids, points, cell types, duplicate
ids); only the schema step is done here, by a validator made once per process.
"""

from __future__ import annotations

import traceback

import jsonschema
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader.nbgraderformat import ValidationError, common
from nbgrader.nbgraderformat.v3 import MetadataValidatorV3
from nbgrader.preprocessors import NbGraderPreprocessor

_VALIDATORS: dict[int, jsonschema.protocols.Validator] = {}  # schema version -> its validator


class _SchemaCheckedOnce(common.BaseMetadataValidator):
    """The base validator's step for one cell (its schema version, then the schema)."""

    def validate_cell(self, cell: NotebookNode) -> None:
        if "nbgrader" not in cell.metadata:
            return
        meta, expected = cell.metadata["nbgrader"], self.schema_version
        version = meta.get("schema_version", 0)
        if version < expected:
            raise common.SchemaTooOldError(
                f"Outdated schema version: {version} (expected {expected})", version, expected
            )
        if version > expected:
            raise common.SchemaTooNewError(
                f"Schema version is too new: {version} (expected {expected})", version, expected
            )
        if expected not in _VALIDATORS:
            cls = jsonschema.validators.validator_for(self.schema)
            cls.check_schema(self.schema)  # what jsonschema.validate repeats for every cell
            _VALIDATORS[expected] = cls(self.schema)
        error = jsonschema.exceptions.best_match(_VALIDATORS[expected].iter_errors(meta))
        if error is not None:
            raise error


class MetadataValidator(MetadataValidatorV3, _SchemaCheckedOnce):
    """nbgrader's v3 validator, whose `super().validate_cell` is now the step above: the
    method order puts _SchemaCheckedOnce between it and nbgrader's base."""


class CheckCellMetadata(NbGraderPreprocessor):
    """nbgrader's CheckCellMetadata, with the validator above: the same errors and log."""

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        try:
            MetadataValidator().validate_nb(nb)
        except ValidationError:
            self.log.error(traceback.format_exc())
            msg = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(msg)
            raise ValidationError(msg) from None
        return nb, resources
