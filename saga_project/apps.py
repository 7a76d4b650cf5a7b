from django.apps import AppConfig


class ProjectConfig(AppConfig):
    """The project's own app: no models, just the checks that span every surface (saga_project.checks)."""

    name = "saga_project"
    verbose_name = "Semantic Saga"

    def ready(self) -> None:
        from saga_project import checks  # noqa: F401  (registers the project-wide checks)
