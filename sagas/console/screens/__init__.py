"""The console's own screens, one module per subject, each a ConsoleScreens class whose URLs the console site
registers before Django's model pages (sagas.console.site): approvals, recovery, one saga (detail with the DAG,
preview report, audit verification, saga-level operations), policy, kill switch, contract diff."""
