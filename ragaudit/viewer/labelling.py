"""The labelling pages and their JSON API, mounted by the viewer's app."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
