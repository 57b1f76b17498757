"""Deletes of S3 objects in batches, through botocore rather than pyarrow. The rest of the S3
seam (reads, writes, copies, listings) is pyarrow's (lake/storage.py).

pyarrow's delete_file is a DELETE plus a look at the parent "directory", and when the file was the last one
under its prefix, a PUT of an empty marker object (`prefix/`): pyarrow keeps a directory existing after its last
file goes, as a file system would (a known Arrow behaviour, with no option to turn it off in pyarrow 26). DuckDB writes
no markers. Removing N files (a cleanup, a failed model's files) took up to 3 N requests one after the other and
left marker objects behind; DeleteObjects takes up to 1,000 keys a request and leaves nothing.

botocore (the AWS SDK for Python's core) signs the requests; its default credential chain (environment, ~/.aws,
instance profile) is the one pyarrow's AWS SDK uses, so a profile without keys reaches the same account.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

BATCH = 1000  # S3's limit of keys in one DeleteObjects request


class S3BatchDeleter:
    """Batched deletes for one S3 configuration (one botocore client, made on first use)."""

    def __init__(self, *, endpoint_url: str | None, region: str | None, key_id: str | None, secret: str | None,
                 session_token: str | None, url_style: str | None, max_attempts: int) -> None:
        self._settings = dict(endpoint_url=endpoint_url, region=region, key_id=key_id, secret=secret,
                              session_token=session_token, url_style=url_style, max_attempts=max_attempts)
        self._client: Any = None
        self._lock = threading.Lock()

    def _s3(self) -> Any:
        with self._lock:
            if self._client is None:  # botocore loads its service models on first use: not at import
                import botocore.session
                from botocore.config import Config

                s = self._settings
                style = {"path": "path", "vhost": "virtual"}.get(str(s["url_style"]), "auto")
                keys = {"aws_access_key_id": s["key_id"], "aws_secret_access_key": s["secret"],
                        "aws_session_token": s["session_token"]} if s["key_id"] and s["secret"] else {}
                self._client = botocore.session.get_session().create_client(
                    "s3", region_name=s["region"] or None, endpoint_url=s["endpoint_url"],
                    # throttling (503 SlowDown) and dropped connections: the SDK's standard backoff
                    config=Config(s3={"addressing_style": style},
                                  retries={"mode": "standard", "total_max_attempts": s["max_attempts"]}),
                    **keys)
            return self._client

    def delete(self, bucket: str, keys: Iterable[str]) -> list[tuple[str, str]]:
        """Delete the keys of one bucket; the (key, S3's reason) of each one S3 refused (AccessDenied, ...). A
        missing key counts as deleted (S3's rule too).

        Raises:
            OSError: a request failed as a whole (unreachable endpoint, refused credentials, after retries).
        """
        todo = list(dict.fromkeys(keys))
        refused: list[tuple[str, str]] = []
        for start in range(0, len(todo), BATCH):
            batch = todo[start:start + BATCH]
            answer = self._call(f"deleting {len(batch)} objects of the bucket {bucket!r}", "delete_objects",
                                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
            refused += [(r.get("Key", ""), f"{r.get('Code', '')}: {r.get('Message', '')}")
                        for r in answer.get("Errors", [])]
        return refused

    def _call(self, what: str, operation: str, **kw: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self._s3(), operation)(**kw)
        except ClientError as e:
            err = e.response.get("Error", {})
            raise OSError(f"S3 refused {what}: {err.get('Code', '')}: {err.get('Message', '')}") from None
        except BotoCoreError as e:
            raise OSError(f"S3 failed {what}: {e}") from None
