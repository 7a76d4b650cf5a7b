from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "Action registry"

    def ready(self) -> None:
        from registry import checks  # noqa: F401  (registers the SAGA_ACTIONS_FILE check)
