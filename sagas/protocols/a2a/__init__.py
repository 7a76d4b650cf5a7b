"""A2A 1.0: the commands peers send, the SDK's request handler and task store on our models, approval gates as
INPUT_REQUIRED, and the HTTP app."""
