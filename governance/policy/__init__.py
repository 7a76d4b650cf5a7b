"""May THIS action happen NOW: the facts a policy decides on (facts), the configured backend and its evaluation
(engine), the backends themselves (json_rules; rego and opa, which share as_code), and the evidence of which
policy revision is in force (revision)."""
