"""Chat alerts: a contradiction (or the nightly summary) posted to Slack, Telegram or a webhook.

Layer 4, beside ``llm`` (neither imports the other): imports ``stores`` (ports), ``rules``, ``core``;
``memory`` (a resolution answered, an undo withdrawn) and everything above may use it.

The flow is queue -> claim -> send -> mark, and each part is shaped by what can go wrong:

1. reflect opens a contradiction (one atomic graph write). Nothing about alerts happens there.
2. Queue (``outbox.Outbox.sync_contradictions``): every OPEN contradiction gets one ``Alert`` node
   per enabled channel whose ``teams`` include its team, MERGEd on the key
   ``{contradiction_id}:{channel}``. A sync over the graph, not a side effect of opening, so a
   crash between the two loses nothing (the next sync finds it), and the key makes it impossible
   to queue the same alert twice. The message (``message.AlertMessage``) is built once, here, and
   stored with the alert: every retry, on any replica, after any restart, sends the same content
   with the same ``Idempotency-Key``.
3. Claim (``Outbox.claim``): one due alert at a time per channel; a claim pushes its next attempt
   out by a lease, so two replicas never post the same alert at the same time. A claimed alert
   whose contradiction is no longer open (resolved since it was queued) is ``dropped``, with the
   reason, and never sent.
4. Send (``senders.Sender.send``): the message rendered for its channel (``render``, pure) and
   POSTed. Webhook URLs and bot tokens live only inside the senders and are masked in every error.
5. Mark (``delivery.deliver_due``): delivered, or the next attempt as ``delivery.RetryStrategy``
   decides (exponential backoff with jitter; after ``max_attempts`` the alert is ``failed``: kept
   and listed, never deleted, and ``Outbox.requeue_failed`` sends it again once the channel is
   fixed, e.g. ``taskzilla-sleep alerts requeue --all-failed``). Delivery is at-least-once: a
   crash after the POST and before the mark repeats it, with the same key.

Import from the submodules (``message``, ``render``, ``senders``, ``outbox``, ``delivery``).
"""
