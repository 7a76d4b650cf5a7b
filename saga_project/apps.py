from django.apps import AppConfig


class ProjectConfig(AppConfig):
    """The project's own app: no models, just the checks that span every surface (saga_project.checks), and the
    Celery app made Celery's current one before anything is sent (saga_project.celery)."""

    name = "saga_project"
    verbose_name = "Semantic Saga"

    def ready(self) -> None:
        from saga_project import celery, checks  # noqa: F401  (the Celery app; registers the project-wide checks)


class OperatorProjectConfig(ProjectConfig):
    """The same app in an operator verb's lighter set-up (saga_project.operator_settings): the checks, no Celery app
    (those verbs send no task: sagas.apps.OperatorSagasConfig). Governance's identity and policy checks are
    registered here too, as its app does where it is installed: a read verb's settings leave that app out
    (saga_project.read_settings), not its checks."""

    def ready(self) -> None:
        from governance import checks as governance_checks  # noqa: F401  (registers them; once, wherever imported)
        from saga_project import checks  # noqa: F401  (registers the project-wide checks)
