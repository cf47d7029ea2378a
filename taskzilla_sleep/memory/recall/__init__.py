"""Recall: what the bot gets back for a query (``query``), how the k slots are filled (``select``),
one item (``item``) and the block for a model's prompt (``prompt``)."""

from taskzilla_sleep.memory.recall.item import ContradictionRef, RecallItem
from taskzilla_sleep.memory.recall.prompt import render_prompt
from taskzilla_sleep.memory.recall.query import recall

__all__ = ["ContradictionRef", "RecallItem", "recall", "render_prompt"]
