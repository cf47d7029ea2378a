"""The two prompts, each in its own module with its answer models, JSON schema and version
(``distill``, ``reflect``); ``shared`` holds what both use: the Prompt, the data-block encoding and
the parsing of an answer's outer shape.

``DISTILL`` (v2) turns groups of related chat messages into at most three team beliefs each;
``REFLECT`` (v2) says how one new belief relates to each of its numbered candidates. A prompt is
data: the client sends ``*_messages(batch)`` (plus ``prompt.response_format()`` when the server
supports structured output), ``prompt.parse(content)`` checks the answer's outer shape, and
``*_items(answer, batch)`` validates each item on its own against what was asked — a bad item
costs only itself. What is wrong goes back to the model in the one corrective retry.

The contract, read against Graphiti's, Hindsight's and mem0's prompts:

- **Chat is data.** Messages are numbered, JSON-encoded, one a line, inside a tagged block the
  system prompt declares to be data, never instructions (``<`` is escaped, so no message can close
  the block). Numbers are mapped back to ids in code: a model never copies a 27-character id.
- **Judgement in categories, numbers in code.** DISTILL answers an ``evidence`` category; the
  ledger's input is ``EVIDENCE_CONFIDENCE[evidence]``. The model never rates itself.
- **The reason comes before the label**, so the label follows from it.
- **The static part comes first** (system prompt with its worked examples), so a provider can
  cache the prefix; the request's data comes last.

Changing a prompt's wording or schema means a new version string: stored patterns, verdicts,
contradictions and step results record the prompt id that produced them.
"""
