"""What the conversation page's Agents section shows (templates/canvas/conversation_detail.html
`#agent-tree`): the page's sub-agent tree, read by the page view and re-read by its socket
(canvas.ui_consumers) when the tree may have changed."""

from __future__ import annotations

import uuid
from typing import Any

from channels.db import database_sync_to_async

from conversations.tree import any_active, subtree


def agent_tree_context(conversation_id: uuid.UUID | str) -> dict[str, Any]:
    """`agent_tree`: the nested descendants ([] hides the section); `agent_tree_live`: some
    node may still change, so the socket's safety poll keeps re-reading it."""
    nodes = subtree(conversation_id)
    return {"agent_tree": nodes, "agent_tree_live": any_active(nodes)}


aagent_tree_context = database_sync_to_async(agent_tree_context)
