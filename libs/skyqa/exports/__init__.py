"""A release written in the formats of the field's evaluation frameworks (VLMEvalKit,
lmms-eval), read from the release folder as shipped."""
