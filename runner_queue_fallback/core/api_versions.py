"""The REST API versions the action speaks, spelled as the `api-version` input takes them.

Here, below the client, because the input rules read the spelling too; how the client asks for a
version and moves to the older one is `github/versions.py`'s.
Ref: https://docs.github.com/rest/about-the-rest-api/api-versions
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["API_VERSION_CHOICES", "AUTO", "NEWER", "OLDER", "ApiVersionSetting"]

#: The contract whose dispatch reply carries the run id.
NEWER: Final = "2026-03-10"
#: The contract of older servers: a dispatch answers 204 without the run.
OLDER: Final = "2022-11-28"
AUTO: Final = "auto"
#: The values of the `api-version` input, as action.yml lists them.
API_VERSION_CHOICES: Final = (AUTO, NEWER, OLDER)

ApiVersionSetting = Literal["auto", "2026-03-10", "2022-11-28"]
