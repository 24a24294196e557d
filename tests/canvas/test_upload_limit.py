"""The upload limit and the composers' limits agree: a box filled to its maxlength can be sent."""

from __future__ import annotations

from django.conf import settings

from orchestration.services import MAX_PROMPT_CHARS


def test_a_full_composer_fits_in_one_request_body():
    # maxlength counts UTF-16 units; one unit is at most 3 UTF-8 bytes, each sent as %XX. So
    # the page's own check keeps a form body under the limit, with room for the other fields.
    assert 9 * MAX_PROMPT_CHARS + 10_000 < settings.DATA_UPLOAD_MAX_MEMORY_SIZE
