"""The Content-Security-Policy header, and templates that can live with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
EXPECTED = {
    "default-src": {"'self'"},
    "script-src": {"'self'"},
    "style-src": {"'self'"},
    "img-src": {"'self'", "data:"},
    "connect-src": {"'self'"},
    "object-src": {"'none'"},
    "base-uri": {"'self'"},
    "form-action": {"'self'"},
    "frame-ancestors": {"'none'"},
}


def policy(response) -> dict[str, set[str]]:
    header = response.headers["Content-Security-Policy"]
    directives = (part.split() for part in header.split(";") if part.strip())
    return {name: set(values) for name, *values in directives}


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/login/", "/", "/teams/", "/tokens/", "/approvals/"])
def test_pages_carry_the_policy(client, user, url):
    if url != "/login/":
        client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    assert policy(response) == EXPECTED


@pytest.mark.django_db
def test_the_api_and_its_docs_carry_it_too(client, user):
    client.force_login(user)
    assert policy(client.get("/api/docs")) == EXPECTED
    assert policy(client.get("/api/conversations")) == EXPECTED


INLINE = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    "event handler attribute": re.compile(r"\son[a-z]+\s*=", re.I),
    "hx-on (needs eval)": re.compile(r"\bhx-on", re.I),
    "js: value (needs eval)": re.compile(r"""hx-(vals|vars|headers)=["']\s*js:""", re.I),
    "style attribute": re.compile(r"\sstyle\s*=", re.I),
    "style element": re.compile(r"<style\b", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
}


@pytest.mark.parametrize("template", sorted(TEMPLATES.rglob("*.html")), ids=str)
def test_templates_have_no_inline_code(template):
    text = template.read_text()
    found = [name for name, pattern in INLINE.items() if pattern.search(text)]
    assert not found, f"{template.relative_to(TEMPLATES)}: {found}"
