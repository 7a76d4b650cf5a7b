from django.apps import AppConfig


class SagasConfig(AppConfig):
    name = "sagas"
    verbose_name = "Sagas"

    def ready(self) -> None:
        # Registers the Celery tasks in every process, not only in workers (where Celery's autodiscovery finds
        # them): without a broker, the embedded executor runs the very task a nudge names (coordinator.nudges).
        from sagas import tasks  # noqa: F401
        from sagas.protocols.proxy import checks  # noqa: F401  (registers the SAGA_PROXY_CONFIG check)
