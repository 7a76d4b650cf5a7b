"""Running work: attempts of nodes and immediate steps, their group commit and record retry, fan-out, the ready queries
and the nudges that wake workers."""
