"""dbt-tests-adapter's persist_docs suite on this adapter.

Not here: BasePersistDocs (its view's column comments are not persisted; see the suite report)."""

from __future__ import annotations

from dbt.tests.adapter.persist_docs.test_persist_docs import (
    BasePersistDocsColumnMissing,
    BasePersistDocsCommentOnQuotedColumn,
)


class TestPersistDocsColumnMissing(BasePersistDocsColumnMissing):
    pass


class TestPersistDocsCommentOnQuotedColumn(BasePersistDocsCommentOnQuotedColumn):
    pass
