"""`dbt init` offers a ducklake profile: the template's defaults make a valid profile of this adapter."""

from __future__ import annotations

import os

import yaml

from dbt.adapters.ducklake.credentials import DuckLakeCredentials, project_dir
from dbt.include import ducklake


def test_template_defaults_make_valid_credentials() -> None:
    with open(os.path.join(ducklake.PACKAGE_PATH, "profile_template.yml")) as f:
        template = yaml.safe_load(f)
    assert template["fixed"] == {"type": "ducklake"}
    values = {k: v["default"] for k, v in template["prompts"].items()}
    threads = values.pop("threads")
    creds = DuckLakeCredentials.from_dict({**values})
    # relative paths are the project's (--project-dir of the last dbt invocation, else the current directory)
    assert (creds.catalog, creds.data_path, creds.schema, creds.master) == (
        os.path.join(project_dir(), "metadata.ducklake"), os.path.join(project_dir(), "data") + "/", "main",
        "local[*]")  # auto, in a test process (no terminal, DBT_DUCKLAKE_WARM=0)
    assert threads >= 1
    # every prompt is a profile key of this adapter
    assert set(template["prompts"]) - {"threads"} <= set(DuckLakeCredentials.__dataclass_fields__)


def test_sample_profile_is_valid() -> None:
    with open(os.path.join(ducklake.PACKAGE_PATH, "sample_profiles.yml")) as f:
        sample = yaml.safe_load(f)
    out = dict(sample["default"]["outputs"]["dev"])
    assert out.pop("type") == "ducklake" and out.pop("threads") == 4
    assert DuckLakeCredentials.from_dict(out).catalog == os.path.join(project_dir(), "metadata.ducklake")
