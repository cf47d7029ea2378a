"""Resolving contradictions from chat: Slack buttons (signed interactions) and Telegram inline
keyboards (a webhook checked by its secret token), served by the worker beside ``/v1``.

``slack`` verifies and reads Slack's requests; ``ops`` decides what a click does (which channel,
which teams, who) and answers the chat; ``routes`` is the HTTP layer. The alert's answer after any
resolution, from chat or not, is queued by ``contradictions.resolve``.
"""
