"""The Jinja2 environment for the HTML reports (templates ship as package data in reports/templates)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES = Path(__file__).with_name("templates")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    # Autoescape everything: reasons, configs and paths come from run files, not from us.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
