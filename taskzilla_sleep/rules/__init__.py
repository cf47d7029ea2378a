"""Layer 2, rules: pure judgement (beliefs/, policies, entities, access). Imports only ``core``."""
